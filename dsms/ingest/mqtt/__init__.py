"""MQTT input and output (SPEC sections 1, 4, 6 and 10; docs/mqtt.md): streams fed from a broker topic and
query results published to one.

- ``url.py``: broker URLs and the client arguments they stand for;
- ``payloads.py``: message payloads to elements (through the HTTP decoders), timestamps, result encoding;
- ``connection.py``: the one reconnect loop (backoff with jitter) both adapters run;
- ``source.py``: ``MqttIngest``, a stream fed from a topic filter, with dead letters;
- ``publisher.py``: ``MqttPublisher``, a query's results published to a topic.
"""

from dsms.ingest.mqtt.connection import BACKOFF_CAP, BACKOFF_START
from dsms.ingest.mqtt.payloads import Malformed, decode_payload, encode_element, parse_timestamp
from dsms.ingest.mqtt.publisher import MqttPublisher
from dsms.ingest.mqtt.source import MqttIngest, Sink
from dsms.ingest.mqtt.url import MqttUrl, parse_mqtt_url

__all__ = [
    "BACKOFF_CAP",
    "BACKOFF_START",
    "MqttIngest",
    "MqttPublisher",
    "MqttUrl",
    "Malformed",
    "Sink",
    "decode_payload",
    "encode_element",
    "parse_mqtt_url",
    "parse_timestamp",
]
