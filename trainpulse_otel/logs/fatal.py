"""A process's death in one line: fatal signals, CUDA errors, a launcher's report, the kernel's OOM killer.

A Python traceback tells a crash with its exception (:mod:`.tracebacks`); these are the lines that tell one
without it, or before it: the shell's ``Segmentation fault (core dumped)``, a signal handler's ``Caught signal 7
(Bus error: nonexistent physical address)``, a CUDA error raised in a C++ thread (``terminate called …`` /
``what():  CUDA error: unspecified launch failure``, NCCL's watchdog ``terminated with exception: CUDA error:
…``), DeepSpeed's launcher (``exits with return code = -9``), Slurm (``srun: error: node7: task 3: Killed``,
``Detected 1 oom-kill event``), the kernel's OOM killer and a data-loader worker killed by a signal. Each
function reads one line and returns the details of a ``process_failed`` event, or None. Pure.
"""

from __future__ import annotations

import re
from typing import Any

from .bars import after_bar
from .tracebacks import signal_name

#: A shell's or a handler's words for a fatal signal: the signal they name.
SIGNAL_WORDS = (
    ("Segmentation fault", "SIGSEGV"),
    ("段错误", "SIGSEGV"),
    ("Bus error", "SIGBUS"),
    ("总线错误", "SIGBUS"),
    ("Aborted (core dumped)", "SIGABRT"),
    ("Fatal Python error: Aborted", "SIGABRT"),  # faulthandler's words for it
    ("已放弃", "SIGABRT"),
    ("Illegal instruction", "SIGILL"),
    ("Floating point exception", "SIGFPE"),
)
#: A shell's job report in another language naming the signal (Czech bash: ``18322 Neúspěšně ukončen (SIGABRT)
#: (core dumped [obraz paměti uložen]) $marian_home/marian …``).
NAMED_SIGNAL = re.compile(r"\((SIG[A-Z]{2,})\)")
#: ``Caught signal 7 (Bus error: nonexistent physical address)`` (UCX, OpenMPI), ``*** SIGSEGV (@0x0) received
#: by PID`` (glog), absl's ``*** SIGBUS received at time=…``, ``received signal SIGSEGV`` (gdb), ``Signal (11) received``.
CAUGHT = re.compile(
    r"[Cc]aught signal (?P<num>\d+) \((?P<words>[^):]+)|\*\*\* (?P<glog>SIG[A-Z]+) (?:\(@|received at time=)|received signal (?P<gdb>SIG[A-Z]+)"
    r"|\bSignal \((?P<bare>\d+)\) received|(?:^\s*|\] )Signal: (?P<words2>[A-Z][\w ]+?) \((?P<num2>\d+)\)"
)
#: glibc aborting on a corrupted heap: 2.2x's ``*** Error in `python3.6': munmap_chunk(): invalid pointer: 0x… ***``,
#: later releases' bare ``free(): invalid pointer``, ``double free or corruption (out)``, ``malloc(): …``.
GLIBC_ABORT = re.compile(
    r"\*\*\* Error in `[^`']+'?: (?P<what>[^*]+?)(?:: 0x[0-9a-f]+)? \*\*\*"
    r"|^\s*(?P<bare>(?:free|munmap_chunk|malloc|realloc)\(\): [a-z][\w ()]+|double free or corruption(?: \(\w+\))?"
    r"|corrupted size vs\. prev_size)\s*$"
)
#: Ray telling that the process behind an actor or task died (its traceback's exception, or its sentences: the
#: raylet's ``A worker died or was killed while executing a task by an unexpected system error.``, Ray Train's
#: ``Worker 0 has failed.``).
RAY_DEATH = re.compile(
    r"\bray\.exceptions\.(?P<exc>ActorDiedError|RayActorError|WorkerCrashedError|ActorUnavailableError): (?P<msg>.*)"
    r"|(?P<said>The actor is dead because its worker process has died"
    r"|A worker died or was killed while executing a task by an unexpected system error|Worker \d+ has failed\.)"
)
#: horovodrun's report of the first process that exited non-zero (under ``Horovod detected that one or more processes
#: exited with non-zero status``): ``Process name: elastic-test-worker-1[0]``, its host and local rank.
HOROVOD_FIRST = re.compile(r"^\s*Process name: (?P<host>[\w.-]+)\[(?P<local>\d+)\]\s*$")
#: The launcher before torchrun (``python -m torch.distributed.launch``) raising on a worker's death:
#: ``subprocess.CalledProcessError: Command '[…, '--local_rank=1', …]' died with <Signals.SIGKILL: 9>.``
LEGACY_LAUNCH = re.compile(
    r"CalledProcessError: Command '\[.*?--local_rank[= ](?P<local>\d+).*?\]' "
    r"(?:died with <Signals\.(?P<signal>SIG\w+): \d+>|returned non-zero exit status (?P<code>\d+))"
)
#: glog's (and absl's) FATAL, which aborts the process after it: ``F0531 10:17:00.123456  9276 file.cc:487] …`` at
#: a line's start or glued after a bar's ``]`` (every more specific FATAL — a CUDA error, an OOM — is read first).
GLOG_FATAL = re.compile(r"(?:^|\])F\d{4} \d{2}:\d{2}:[\d.]+\s+\d+ (?P<where>[\w./-]+:\d+)\] (?P<message>.+)")
#: ROCm's runtime on a GPU's bad memory access (HIP's illegal address): ``Memory access fault by GPU node-1 (Agent
#: handle: 0x5d8d620) on address 0x7f81…. Reason: Page not present or supervisor privilege.``
ROCM_FAULT = re.compile(r"Memory access fault by GPU node-\d+ .*")
#: zsh's report of a job a signal ended: ``[1]    18956 IOT instruction (core dumped)  python main.py``, and of a
#: foreground one: ``zsh: abort      mlx_lm.lora --model …``.
ZSH_DEATH = re.compile(
    r"^(?:\[\d+\]\s+\d+|zsh:) (?P<what>IOT instruction|segmentation fault|bus error|killed|abort|illegal hardware instruction)\b"
)
#: libc++'s abort on a C++ exception nothing caught, its message on the same line: ``libc++abi: terminating due to
#: uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed: Internal Error``.
UNCAUGHT = re.compile(r"terminating due to uncaught exception of type (?P<what>\S+?):? (?P<message>.*)")
#: What one of a process's death lines holds (the scanner's cheap test before :func:`death`).
DEATH_MARKS = ("signal", "Signal", "Segmentation", "Bus error", "Killed", "Aborted", "core dumped", "段错误", "已放弃")
DEATH_MARKS += ("*** Error in", "(): ", "double free", "corrupted size", "ray.exceptions.", "The actor is dead")
DEATH_MARKS += ("A worker died or was killed", "has failed.", "*** SIG")
DEATH_MARKS += ("Process name: ", "CalledProcessError: Command", "F0", "F1", "Memory access fault by GPU", "IOT instr")
DEATH_MARKS += ("segmentation fault", "bus error", "killed", "abort", "illegal hardware", "uncaught exception of")
DEATH_MARKS += (" received at time=", "Abort trap", "Illegal instruction", "Floating point exception", "ssertion")
#: A C or Objective-C assertion that aborts the process: glibc's ``python: x.c:12: f: Assertion `n > 0' failed.`` (a
#: CUDA kernel's device-side assert closes it with a backtick),
#: Apple's (Metal's kernels on MPS) ``…/MPSNDArray.mm:120: failed assertion `[MPSNDArrayDescriptor …] error: …'``.
ASSERTION = re.compile(r"Assertion [`'](?P<glibc>.+?)[`'] failed\.|failed assertion [`'](?P<apple>.+?)'?$")
#: A shell's report of a job it ran dying: ``Segmentation fault (core dumped)``, ``/bin/bash: line 1: 4242 Killed
#: python train.py``, a bare ``Killed``.
SHELL_DEATH = re.compile(
    r"^(?:.*: line \d+:\s+\d+ |\d+ )?(?P<what>Killed|Segmentation fault|Bus error|Aborted|Abort trap|Illegal instruction"
    r"|Floating point exception)\b"
)
#: The signal each shell's word for a death names (bash's capitalised, zsh's in lower case), by the word lowered.
SHELL_SIGNALS = {
    "killed": "SIGKILL",
    "segmentation fault": "SIGSEGV",
    "bus error": "SIGBUS",
    "aborted": "SIGABRT",
    "abort": "SIGABRT",
    "iot instruction": "SIGABRT",
    "illegal hardware instruction": "SIGILL",
    "abort trap": "SIGABRT",  # macOS's bash: ``Abort trap: 6``
    "illegal instruction": "SIGILL",
    "floating point exception": "SIGFPE",
}
#: DeepSpeed's launcher: ``[launch.py:321:sigkill_handler] ['python', …, '--local_rank=4', …] exits with return
#: code = -9``; an IDE's run of the script (PyCharm): ``Process finished with exit code -1073741819 (0xC0000005)``
#: (Windows' access violation: its segmentation fault).
LAUNCHER_EXIT = re.compile(
    r"(?:exits with return code =|Process finished with exit code) (?P<code>-?\d+)"
    r"|\b(?:failed|exited|terminated) with (?:exit|return) code:? (?P<signalled>-\d+)"  # a wrapper's word of a signal
)
EXIT_MARKS = ("exits with return code", "Process finished with exit code", "with exit code -", "with return code -")
#: Windows' exit statuses of a process its OS ended, by their hex form.
WINDOWS_STATUS = {
    "0xC0000005": "access violation",
    "0xC00000FD": "stack overflow",
    "0xC0000409": "stack buffer overrun",
}
LOCAL_RANK = re.compile(r"--local_rank[= ](\d+)")
#: Slurm's step report: ``srun: error: node-7: task 3: Killed``, ``…: task 0: Exited with exit code 1``.
SRUN = re.compile(
    r"srun: error: (?P<host>[\w.-]+): tasks? (?P<task>\d+)(?:-\d+)?: (?P<what>[A-Z][\w ]+?)(?: (?P<code>\d+))?\s*$"
)
#: The kernel's OOM killer and Slurm's cgroup (``Detected 1 oom-kill event(s)``; its accounting's ``Job 7518 exceeded
#: memory limit (626359956 > 512000000), being killed``): the host ran out of memory and killed a process.
HOST_OOM = (
    "Out of memory: Kill",
    "oom-kill event",
    "oom_kill event",  # Slurm 23.02+: ``Detected 6 oom_kill events in StepId=…``
    "OutOfMemory: Process killed by SIGKILL",  # SageMaker's training toolkit
    "oom_kill_process",
    "Memory cgroup out of memory",
    "OOMKilled",
    "exceeded memory limit",
    "Exceeded job memory limit",
    "Exceeded step memory limit",
    "killed due to memory pressure (OOM)",
)
#: Ray's memory monitor killing workers on a node, which it names: ``1 Workers (tasks / actors) killed due to memory
#: pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 351e…, IP: 10.95.143.76)``.
RAY_OOM_NODE = re.compile(r"killed due to memory pressure \(OOM\).*?\bIP: (?P<ip>[\w.:-]+)\)")
#: A data-loader worker killed (``DataLoader worker (pid 4242) is killed by signal: Killed.``), gone, or dying of
#: SIGBUS on a full /dev/shm (the worker's own ``ERROR: Unexpected bus error encountered in worker. This might be
#: caused by insufficient shared memory (shm).``, the main process's error follows).
LOADER = re.compile(
    r"DataLoader worker \(pid(?:\(s\))? ([\d, ]+)\) (?:is killed by signal: (?P<how>[\w ]+)|exited unexpectedly)"
    r"|Unexpected bus error encountered in worker"
)
LOADER_MARKS = ("DataLoader worker", "bus error encountered in worker")
#: The GPU a CUDA error names: CNTK's ``CUBLAS failure 13: CUBLAS_STATUS_EXECUTION_FAILED ; GPU=1 ; hostname=…``.
CUDA_GPU = re.compile(r"\bGPU=(\d+)\b")
CUDA_HOST = re.compile(r"\bhostname=([\w.-]+)")
#: A CUDA error in any wording: ``CUDA error: an illegal memory access was encountered``, NCCL's ``Cuda failure
#: 'unknown error'`` / ``Cuda failure 999 'unknown error'``, ``CUDNN_STATUS_EXECUTION_FAILED``, a glog check's
#: ``Check failed: error == cudaSuccess unspecified launch failure`` (Caffe/Caffe2, ``(4 vs. 0)`` in some), cuBLAS's
#: legacy ``!!!! kernel execution error.``, Marian's ``CUDA error 999 'unknown error'``, the CUDA samples' ``CUDA error at
#: file.cu:1861 code=77(<unknown>)``, the runtime's own words alone (``an illegal memory access was encountered``), and
#: the driver API's names of the fatal ones (TensorFlow's ``could not synchronize on CUDA context: CUDA_ERROR_LAUNCH_FAILED``)
#: or a driver call failing with a fatal code (PhysX's ``SynchronizeStreams cuEventRecord failed with error 700``: 700
#: an illegal address, 702 a launch timeout, 714-719 the kernel's faults, 999 unknown), and PyTorch 0.4–1.x's THC
#: check by its code, whatever words follow (``THCudaCheck FAIL file=…/THCReduceAll.cuh line=327 error=77 : an
#: illegal memory access``): the kernel's faults in either numbering (4/719 launch failure, 6/702 timeout, 59/710
#: assert, 73-77/700 bad instruction or address, 30/999 unknown); not ``error=2`` (an out-of-memory event) nor 1.0's
#: harmless ``THCGeneral.cpp … error=11 : invalid argument`` at startup on newer GPUs, after which training runs.
CUDA_ERROR = re.compile(
    r"CUDA error: (?P<message>[^.\n]+)|Cuda failure (?:\d+ )?'(?P<nccl>[^']+)'|(?P<status>CU(?:BLAS|DNN)_STATUS_\w+|cudaError\w+)"
    r"|(?P<assert>device-side assert triggered)|!!!! (?P<legacy>kernel execution error)|CUDA error \d+ '(?P<quoted>[^']+)'"
    r"|CUDA error at \S+ code=\d+\((?P<code>[^)]*)\)|(?P<bare>an illegal memory access was encountered|unspecified launch "
    r"failure|an illegal instruction was encountered|misaligned address)|(?P<driver>CUDA_ERROR_(?:LAUNCH_FAILED|ILLEGAL_"
    r"(?:ADDRESS|INSTRUCTION)|MISALIGNED_ADDRESS|UNKNOWN|LAUNCH_TIMEOUT|HARDWARE_STACK_ERROR|ASSERT))\b|== cudaSuccess \(?(?:\d+ vs\. 0\)\s*)?(?P<check>[a-z][a-z ]+?)(?=F\d{4} |$)"
    r"|(?P<call>\bcu[A-Z]\w+ failed with error (?:70[0-2]|71[4-9]|999))\b"
    r"|(?P<thc>THCudaCheck FAIL file=\S+ line=\d+ error=(?:[46]|30|59|7[3-7]|70[0-2]|71\d|999)\b)",
    re.IGNORECASE,
)
#: What a line of a CUDA error holds (the scanner's cheap test before :func:`cuda_error`).
CUDA_MARKS = ("CUDA error", "Cuda failure", "_STATUS_", "device-side assert", "cudaError", "== cudaSuccess")
CUDA_MARKS += (
    "!!!! kernel",
    "illegal memory access",
    "unspecified launch failure",
    "illegal instruction was",
    "misaligned address",
    "CUDA_ERROR_",
    "failed with error ",
    "THCudaCheck FAIL",
)
#: CUDA errors that are another failure's news: the allocator's (an out-of-memory event), the GPU's memory
#: failing (a GPU fault: :mod:`.gpu_faults`).
NOT_A_CRASH = ("out of memory", "uncorrectable ECC", "ECC error", "NVLink error")


#: Words of the storage failing under the job.
STORAGE_MARKS = ("Errno", "Input/output error", "No space left", "Stale file handle", "Disk quota")


#: OpenMPI's report of a rank it saw die, in its launcher's name (``mpirun``, ``mpiexec``, ``orterun``, PRRTE's
#: ``prterun``): ``mpirun noticed that process rank 7 with PID 0 on node n3 exited on signal 9 (Killed).``
MPIRUN_DEATH = re.compile(
    r"(?:mpirun|mpiexec|orterun|prterun) noticed that process rank (?P<rank>\d+) with PID \S+ on node (?P<host>\S+) "
    r"exited on signal (?P<num>\d+)"
)
#: A host a poster hid: ``HOSTNAME``, ``xxxxxxxx``, ``***``, ``<node>``.
PLACEHOLDER = re.compile(r"^(?:HOSTNAME|[xX]{3,}|\*{3,}|<[^>]*>)$")


def mpirun_death(text: str) -> tuple[dict[str, Any], int] | None:
    """OpenMPI's ``mpirun noticed that process rank N … exited on signal S``: the death's details and its rank."""
    match = MPIRUN_DEATH.search(text)
    if match is None:
        return None
    details: dict[str, Any] = {"signal": signal_name(int(match["num"])), "error": text.strip()[:200]}
    if PLACEHOLDER.match(match["host"]) is None:  # a poster's placeholder is no host
        details["host"] = match["host"]
    return details, int(match["rank"])


def death(text: str) -> dict[str, Any] | None:
    """A line that says a process died: of a signal (:func:`fatal_signal`, zsh's job report), glibc's abort on a
    corrupted heap, ROCm's memory fault, a glog FATAL, the launcher before torchrun or horovodrun naming the dead
    worker, or Ray's word that an actor's or task's process is gone — at its start, or glued after a bar's end."""
    if (glued := after_bar(text)) and (found := _death(glued)) is not None:
        return found
    return _death(text)


def _death(text: str) -> dict[str, Any] | None:
    if (found := fatal_signal(text)) is not None:
        return found
    if (match := GLIBC_ABORT.search(text)) is not None:
        return {"signal": "SIGABRT", "error": (match["what"] or match["bare"]).strip()[:200]}
    if (match := ZSH_DEATH.match(text)) is not None:
        return {"signal": SHELL_SIGNALS[match["what"].lower()], "error": text.strip()[:200]}
    if (match := ROCM_FAULT.search(text)) is not None:
        return {"error": match[0].strip()[:200], "cuda_error": "memory access fault"}
    if "ssertion" in text and (match := ASSERTION.search(text)) is not None:
        return {"signal": "SIGABRT", "error": f"assertion failed: {match['glibc'] or match['apple']}"[:200]}
    if (match := UNCAUGHT.search(text)) is not None:
        return {"signal": "SIGABRT", "error": f"{match['what']}: {match['message'].strip()}"[:200]}
    if (match := GLOG_FATAL.search(text)) is not None:
        return {"signal": "SIGABRT", "error": f"{match['where']}] {match['message'].strip()}"[:200]}
    if (match := LEGACY_LAUNCH.search(text)) is not None:
        found: dict[str, Any] = {"local_rank": int(match["local"]), "launcher": "torch.distributed.launch"}
        if match["signal"]:
            found["signal"] = match["signal"]
        else:
            found["exit_code"] = int(match["code"])
        return found
    if (match := HOROVOD_FIRST.match(text)) is not None:
        return {"host": match["host"], "local_rank": int(match["local"]), "error": "horovodrun: " + text.strip()}
    if (match := RAY_DEATH.search(text)) is not None:
        words = f"{match['exc']}: {match['msg']}" if match["exc"] else match["said"]
        return {"error": words.strip()[:200]}
    return None


def fatal_signal(text: str) -> dict[str, Any] | None:
    """A line that says a process died of a signal: ``signal`` (``SIGSEGV``…), and ``error`` (the words)."""
    if (match := CAUGHT.search(text)) is not None:
        if match["num"] is not None or match["num2"] is not None:
            return {
                "signal": signal_name(int(match["num"] or match["num2"])),
                "error": (match["words"] or match["words2"]).strip(),
            }
        if match["bare"] is not None:
            return {"signal": signal_name(int(match["bare"]))}
        return {"signal": match["glog"] or match["gdb"]}
    stripped = text.strip()
    if stripped[:2] == "**" == stripped[-2:]:  # a paste's Markdown emphasis on the line that matters (``**Killed**``)
        stripped = stripped[2:-2].strip()
    if (match := SHELL_DEATH.match(stripped)) is not None and _shell_report(stripped, match):
        what = match["what"]
        return {"signal": SHELL_SIGNALS[what.lower()], "error": stripped[:200]}
    for words, name in SIGNAL_WORDS:
        if words in text and ("core dumped" in text or "核心已转储" in text or "Fatal Python error" in text):
            return {"signal": name, "error": stripped[:200]}
    if "core dumped" in text and (named := NAMED_SIGNAL.search(text)) is not None:  # a shell in another language
        return {"signal": named[1], "error": stripped[:200]}
    return None


def _shell_report(stripped: str, match: re.Match[str]) -> bool:
    """Whether a line starting with a signal's word is the shell's report of it (``Killed`` alone, ``Segmentation
    fault (core dumped)``, a job line), not a sentence that begins so."""
    rest = stripped[match.end() :].strip()
    return (
        not rest
        or rest.startswith(("(core dumped)", "python", "torchrun", "deepspeed", "/"))
        or re.match(r": \d+\b", rest) is not None  # macOS's bash adds the signal's number: ``Abort trap: 6``
        or match[0] != match["what"]
    )


def launcher_exit(text: str) -> dict[str, Any] | None:
    """DeepSpeed's launcher (or an IDE, or a wrapper script's ``Training failed with exit code -9``) reporting a
    child's exit: ``exit_code``, ``signal`` for a negative one (a Windows status its ``error``), ``local_rank``."""
    if (match := LAUNCHER_EXIT.search(text)) is None:
        return None
    code = int(match["code"] or match["signalled"])
    if code == 0:
        return None
    launcher = "ide" if "Process finished" in text else "deepspeed" if match["code"] else "wrapper"
    details: dict[str, Any] = {"exit_code": code, "launcher": launcher}
    status = next((words for hex_code, words in WINDOWS_STATUS.items() if hex_code.lower() in text.lower()), None)
    if status is not None:
        details["error"] = f"{status} (exit code {code})"
    elif code < 0 and -code < 64:
        details["signal"] = signal_name(-code)
    if (local := LOCAL_RANK.search(text)) is not None:
        details["local_rank"] = int(local[1])
    return details


def srun_failure(text: str) -> tuple[dict[str, Any], int] | None:
    """Slurm's report of a task that failed: its details and the task (the global rank under ``srun``)."""
    if (match := SRUN.search(text)) is None:
        return None
    what = match["what"].strip()
    details: dict[str, Any] = {"host": match["host"], "error": f"srun: task {match['task']}: {what}"}
    if match["code"] is not None:
        details["exit_code"] = int(match["code"])
    elif what == "Killed":
        details["signal"] = "SIGKILL"
    return details, int(match["task"])


def host_oom(text: str) -> dict[str, Any] | None:
    """The host's memory ran out and a process was killed for it (the kernel's OOM killer, a Slurm cgroup)."""
    if not any(words in text for words in HOST_OOM):
        return None
    details = {"signal": "SIGKILL", "error": "host out of memory: " + text.strip()[:200]}
    if (ray := RAY_OOM_NODE.search(text)) is not None:
        details["host"] = ray["ip"]
    return details


def loader_death(text: str) -> dict[str, Any] | None:
    """A data-loader worker killed by a signal or gone (the training process dies of it)."""
    if (match := LOADER.search(text)) is None:
        return None
    details: dict[str, Any] = {"error": text[match.start() :].split(". ", 1)[0].strip()[:300], "data_loader": True}
    if match[0].startswith("Unexpected bus error"):
        details["signal"] = "SIGBUS"
    return details


#: The storage failing under the job (a save, a data read): EIO, ENOSPC, ESTALE, EDQUOT in any wording.
STORAGE = re.compile(
    r"\[Errno (?:5|28|116|122)\][^\n]*|Input/output error|No space left on device|Stale file handle|Disk quota exceeded"
)


def storage_error(text: str) -> dict[str, Any] | None:
    """A storage error that kills a job's process: ``error`` its words, ``storage`` True."""
    match = STORAGE.search(text)
    return None if match is None else {"error": match[0].strip()[:200], "storage": True}


def cuda_error(text: str) -> dict[str, Any] | None:
    """A CUDA error that kills the process: ``error`` its words (``CUDA error: unspecified launch failure``)."""
    if (match := CUDA_ERROR.search(text)) is None:
        return None
    message = next(m for m in match.group(*CUDA_ERROR.groupindex) if m)  # the one alternative that matched
    if any(words.lower() in message.lower() for words in NOT_A_CRASH):
        return None
    details: dict[str, Any] = {"error": f"CUDA error: {message.strip()}"[:200], "cuda_error": message.strip()[:120]}
    if (gpu := CUDA_GPU.search(text)) is not None:
        details["gpu_index"] = int(gpu[1])
    if (host := CUDA_HOST.search(text)) is not None:
        details["host"] = host[1]
    return details
