"""A job diagnosed from its own console output: lines in, training reports and failure events out.

Pure: :class:`LogReader` is handed :class:`LogLine` s — a replayed file's, a
followed file's, an OTLP log record's — and returns the training reports
(:class:`~trainpulse_otel.samples.TrainingSample`) and failure events
(:class:`~trainpulse_otel.samples.LogEvent`) they tell, in order. Each
framework's iteration lines are read in :mod:`.frameworks`, the failure lines
every job prints (NCCL, gloo, CUDA, Python, torchrun, the driver) in
:mod:`.failures`; docs/logs.md lists both.
"""

from .lines import LogLine, rank_of_source, split_prefixes
from .reader import LogReader
from .stats import ReadStats
from .timing import first_stamp

__all__ = ["LogLine", "LogReader", "ReadStats", "first_stamp", "rank_of_source", "split_prefixes"]
