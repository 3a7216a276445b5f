"""Ingestion adapters that feed streams from outside the HTTP API, and their output counterparts.

SPEC section 1 (input arrives over HTTP and MQTT) and section 10 (bad input is counted and dead-lettered where
there is no one to answer). See docs/mqtt.md.
"""

from dsms.ingest.mqtt import (
    Malformed,
    MqttIngest,
    MqttPublisher,
    MqttUrl,
    Sink,
    decode_payload,
    encode_element,
    parse_mqtt_url,
    parse_timestamp,
)

__all__ = [
    "Malformed",
    "MqttIngest",
    "MqttPublisher",
    "MqttUrl",
    "Sink",
    "decode_payload",
    "encode_element",
    "parse_mqtt_url",
    "parse_timestamp",
]
