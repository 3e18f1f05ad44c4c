"""The receiving stage: OTLP metrics from node daemons and OTel-emitting trainers, into node reports; OTLP logs
into console lines.

``wire`` parses protobuf or OTLP/JSON into an ``ExportMetricsServiceRequest``
and serializes the answer; ``points`` flattens it; ``own`` reads TrainPulse's
own instruments back into samples, ``megatron`` reads Megatron-LM's
``megatron.training.*``; ``decode`` puts them together per node (the
resource's ``host.name``), with the account of accepted, rejected and ignored
points (``tally``), and ``series`` keeps what delta temporality needs between
requests. ``logs`` reads an ``ExportLogsServiceRequest`` into the lines the
log reader takes (:mod:`trainpulse_otel.logs`). Pure: the transports
(``api/otlp_ingest.py``, ``api/otlp_grpc.py``) do the I/O.
"""

from .decode import OtlpReceiver, decode_request
from .otlp_logs import DecodedLogs, decode_logs, logs_response, parse_logs_request
from .series import SeriesState
from .tally import Decoded
from .wire import ENCODINGS, JSON, PROTOBUF, UndecodableRequest, encode_response, parse_request, response

__all__ = [
    "ENCODINGS",
    "JSON",
    "PROTOBUF",
    "Decoded",
    "DecodedLogs",
    "OtlpReceiver",
    "SeriesState",
    "UndecodableRequest",
    "decode_logs",
    "decode_request",
    "encode_response",
    "logs_response",
    "parse_logs_request",
    "parse_request",
    "response",
]
