"""The aiohttp application of dsms: the HTTP API of SPEC section 7 on top of ``dsms.runtime.Runtime``."""

from web.app import CONFIG, RUNTIME, create_app

__all__ = ["create_app", "RUNTIME", "CONFIG"]
