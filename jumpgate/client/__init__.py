"""The Python client: build dataflow requests fluently, run them, receive NTF streams as Arrow.

    from jumpgate.client import Jumpgate
    jg = Jumpgate("http://127.0.0.1:8470")
    sales = jg.read("sales/*.jsonl", schema={"item_id": "int32", "price": "decimal(12,2)"})
    table = sales.filter("item_id = 100").project("price").collect()

`builder` turns the fluent calls into contract §1 JSON, `session` speaks the REST API (§4),
`receiver` accepts the TCP streams (§3), `udp` the UDP ones (docs/udp-transport.md), and `ntf` decodes them (§2) without a Python loop per tuple.
`progress` turns each status answer's live counters into a progress display (`collect(progress=True)`).
"""
from .builder import (
    Aggregate,
    Dataflow,
    Filter,
    Join,
    Op,
    Project,
    Read,
    Send,
    Shuffle,
    ShufflePartition,
    build_request,
    read,
)
from .errors import (
    BuilderError,
    ClientError,
    JobFailed,
    JobTimeout,
    MissingDependency,
    RequestRejected,
    StreamError,
)
from .explain import Plan
from .frames import to_pandas
from .ntf import HAVE_NATIVE, arrow_schema, decode_stream, decode_streams, decode_tuples, scan_stream
from .progress import ProgressUpdate, RichProgress
from .receiver import Receiver
from .session import Job, Jumpgate, Output
from .udp import UdpReceiver

__all__ = [
    "Aggregate", "BuilderError", "ClientError", "Dataflow", "Filter", "HAVE_NATIVE", "Job", "JobFailed",
    "JobTimeout", "Join", "Jumpgate", "MissingDependency", "Op", "Output", "Plan", "ProgressUpdate", "Project", "Read",
    "Receiver", "RequestRejected", "RichProgress",
    "Send", "Shuffle", "ShufflePartition", "StreamError", "UdpReceiver", "arrow_schema", "build_request", "decode_stream",
    "decode_streams", "decode_tuples", "read", "scan_stream", "to_pandas",
]
