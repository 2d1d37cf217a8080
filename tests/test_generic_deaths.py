"""Deaths any server can die of, whatever its engine: the specific line that says why beats the generic one
that only says it died. Lines from tests/fixtures/real_lines/generic.log (real, with sources)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bootwatch.pipeline import analyze_path

from .conftest import CORPUS

START = "INFO 08-12 10:11:12 [api_server.py:12] vLLM API server version 0.6.3\nLoading model weights\n"
SGLANG_START = (
    "[2025-05-01 05:11:17] server_args=ServerArgs(model_path='m')\n[2025-05-01 05:11:17] Load weight begin.\n"
)


def report(tmp_path: Path, body: str, head: str = START) -> dict:
    log = tmp_path / "server.log"
    log.write_text(head + body)
    return analyze_path(log)


@pytest.mark.parametrize(
    ("body", "cause"),
    [
        (
            "terminate called after throwing an instance of 'std::runtime_error'\n"
            "  what():  fatal error; see Log::Fatal output\nAborted (core dumped)\n",
            "what():  fatal error; see Log::Fatal output",
        ),
        (
            "terminate called after throwing an instance of 'std::invalid_argument'\n"
            "  what(): Tensor shapes must match for addition\nFatal Python error: Aborted\n\nThread 0x00007f (most recent "
            'call first):\n  File "/x.py", line 3 in f\n',
            "what(): Tensor shapes must match for addition",
        ),
        ("Aborted (core dumped)\n", "Aborted (core dumped)"),
        (
            "/zhome/ee/d/137643/.lsbatch/1586903179.6180387.shell: line 12: 24905 Killed                  "
            "python main.py $LSB_PROJECT_NAME\n",
            "/zhome/ee/d/137643/.lsbatch/1586903179.6180387.shell: line 12: 24905 Killed                  "
            "python main.py $LSB_PROJECT_NAME",
        ),
        ("zsh: killed     nebula upgrade\n", "zsh: killed     nebula upgrade"),
        (
            "[rank0]:[E709 17:05:39.083402482 ProcessGroupNCCL.cpp:1899] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process "
            "group watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=20585, OpType=ALLREDUCE)\n"
            "[rank3]:[E606 09:10:08.363090292 ProcessGroupNCCL.cpp:832] [Rank 3] To avoid data inconsistency, we are "
            "taking the entire process down.\n",
            "Watchdog caught collective operation timeout",
        ),
        (
            "[TM][FATAL][0914.14:00:37.807188][cast.cu:264] CUDA error: no kernel image is available for execution on "
            "the device\n",
            "CUDA error: no kernel image is available",
        ),
        ("[Device not found] Device acquire failed.\n", "Device acquire failed."),
        (  # a Rust panic (mistral.rs, Rust >= 1.73): the message is the line below the location
            "thread 'main' panicked at mistralrs-core/src/pipeline/normal.rs:232:9:\n"
            'File "tokenizer.json" not found at model id "mistralai/Mistral-7B-Instruct-v0.1"\n'
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
            'File "tokenizer.json" not found at model id "mistralai/Mistral-7B-Instruct-v0.1"',
        ),
    ],
)
def test_quiet_death_is_failed_with_the_specific_line(tmp_path: Path, body: str, cause: str) -> None:
    s = report(tmp_path, body)
    assert s["verdict"] == "failed", s
    assert cause in s["failure"]["text"], s["failure"]


def test_generic_death_without_a_reason_still_fails_an_sglang_launch(tmp_path: Path) -> None:
    s = report(tmp_path, "Segmentation fault (core dumped)\n", head=SGLANG_START)
    assert s["engine"] == "sglang"
    assert s["verdict"] == "failed" and s["failure"]["text"] == "Segmentation fault (core dumped)"


@pytest.mark.parametrize(
    ("printed", "want_no", "want_text"),
    [
        (b"error: invalid argument: --no-such-flag\n", 1, "error: invalid argument: --no-such-flag"),
        (b"bash: line 1: vllm: command not found\n", 1, "bash: line 1: vllm: command not found"),
        (b"starting\nlast words: cannot open /models/x\n\n", 2, "last words: cannot open /models/x"),
        (b"starting\nloading\n", 2, "process exited with code 3"),
        (b"", None, "process exited with code 3"),
    ],
)
def test_a_death_no_rule_explains_names_the_last_words_or_the_exit(
    printed: bytes, want_no: int | None, want_text: str
) -> None:
    from bootwatch.pipeline import Analyzer

    a = Analyzer(clock="arrival")
    a.feed(printed, 1.0)
    a.tracker.exited(3, None)
    s = a.summary().to_json()
    assert s["verdict"] == "failed"
    assert (s["failure"]["line_no"], s["failure"]["text"]) == (want_no, want_text)
    assert s["exit"] == {"code": 3, "signal": None}


# A build at startup that fails inside a generic exception: the linker's or compiler's line says why, whether
# it is printed before the traceback (Triton's launcher, sglang#1117) or as the rest of the exception's message
# (a JIT kernel's ninja output, the blind-F1 SGLang log). Lines from real logs.
NINJA_TB = (
    "Traceback (most recent call last):\n"
    '  File "/app/lib/python3.12/site-packages/tvm_ffi/cpp/extension.py", line 542, in build_ninja\n'
    '    raise RuntimeError("\\n".join(msg))\n'
    "RuntimeError: ninja exited with status 1\n"
    "stdout:\n"
    "FAILED: [code=1] sgl_kernel_jit_apply_rope_pos_ids_cos_sin_cache.so \n"
)


def test_linker_line_below_a_generic_build_exception_is_the_cause(tmp_path: Path) -> None:
    body = NINJA_TB + "/usr/bin/ld: cannot find -lcudart\ncollect2: error: ld returned 1 exit status\nKilled\n"
    f = report(tmp_path, body, SGLANG_START)["failure"]
    assert f["text"] == "/usr/bin/ld: cannot find -lcudart"
    assert f["detail"] == "RuntimeError: ninja exited with status 1"


def test_a_detail_far_below_the_exception_is_not_its_message(tmp_path: Path) -> None:
    gap = "".join(f"[2025-05-01 05:11:18] unrelated line {i}\n" for i in range(12))
    body = NINJA_TB + gap + "/usr/bin/ld: cannot find -lcudart\nKilled\n"
    assert report(tmp_path, body, SGLANG_START)["failure"]["text"] == "RuntimeError: ninja exited with status 1"


def test_compiler_error_before_the_traceback_is_the_cause(tmp_path: Path) -> None:
    body = (
        "/tmp/tmps1rkq3y3/main.c:5:10: fatal error: Python.h: No such file or directory\n"
        "    5 | #include <Python.h>\ncompilation terminated.\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.10/subprocess.py", line 369, in check_call\n'
        "    raise CalledProcessError(retcode, cmd)\n"
        "subprocess.CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmps1rkq3y3/main.c']' returned non-zero exit "
        "status 1.\n"
    )
    f = report(tmp_path, body)["failure"]
    assert f["text"] == "/tmp/tmps1rkq3y3/main.c:5:10: fatal error: Python.h: No such file or directory"


def _each_with(prefix: str, lines: tuple[str, ...]) -> str:
    """The lines as a log writes them, each under the same prefix (a process tag, a journald wrapper)."""
    return "".join(prefix + x + "\n" for x in lines)


def test_cann_report_in_the_rest_of_an_npu_exception_is_the_cause(tmp_path: Path) -> None:
    body = _each_with(
        "(Worker_DP0_TP0_EP0 pid=60571) ERROR 12-04 14:46:08 [multiproc_executor.py:597] ",
        (
            "Traceback (most recent call last):",
            '  File "/vllm-workspace/vllm-ascend/vllm_ascend/quantization/w8a8_dynamic.py", line 137, in __init__',
            "    self.moe_all_to_all_group_name = backend.get_hccl_comm_name(",
            "RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:149 HCCL function error: "
            "hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), error code is 7",
            "[ERROR] 2025-12-04-14:46:07 (PID:60571, Device:0, RankID:-1) ERR02200 DIST call hccl api failed.",
            "[PID: 60571] 2025-12-04-14:46:07.669.968 Bind_Failed(EJ0003): Failed to bind the IP port. Reason: The IP "
            "address and port have been bound already.",
        ),
    )
    f = report(tmp_path, body)["failure"]
    assert f["text"].startswith("[PID: 60571] 2025-12-04-14:46:07.669.968 Bind_Failed(EJ0003): ")


# ggml's CUDA backend (ROCm build) names the error, GGML_ABORTs, and Ollama's Go runtime reports the signal: the
# error line is the cause, whatever engine the excerpt is read as (blind-F2's journald excerpt).
def test_ggml_backend_error_then_go_sigabrt(tmp_path: Path) -> None:
    body = _each_with(
        "Feb 18 16:56:30 ms-s1-max ollama[27678]: ",
        (
            'time=2026-02-18T16:56:30.203Z level=DEBUG source=ggml.go:300 msg="key with type not found" key=a default=0',
            "ROCm error: out of memory",
            "  current device: 0, in function stream at //ml/backend/ggml/ggml/src/ggml-cuda/common.cuh:1248",
            "//ml/backend/ggml/ggml/src/ggml-cuda/ggml-cuda.cu:94: ROCm error",
            "/usr/local/lib/ollama/libggml-base.so.0(ggml_abort+0x11d) [0x71bdd5d0003d]",
            "SIGABRT: abort",
        ),
    )
    s = report(tmp_path, body, head="")
    assert s["verdict"] == "failed" and s["engine"] == "ollama"
    assert s["failure"]["text"] == "ROCm error: out of memory"


# A server that refuses its command line prints no banner: the refusal is the cause, whatever parser printed it.
@pytest.mark.parametrize(
    "refusal",
    [
        'error while handling argument "--draft-max": the argument has been removed. use --spec-draft-n-max or '
        "--spec-ngram-mod-n-max",
        "error: unexpected argument '--version' found",
        "flag provided but not defined: -auto-allow",
        "Error: unknown flag: --ca-file",
        "error: a value is required for '--model-id <MODEL_ID>' but none was supplied",
        "error: the following required arguments were not provided:",
    ],
)
def test_an_argument_refusal_is_the_cause_with_no_banner(tmp_path: Path, refusal: str) -> None:
    s = report(tmp_path, refusal + "\n\nusage:\n  -h, --help   show this help\n", head="")
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"] == refusal and s["failure"]["category"] == "config"


def test_llama_cpp_usage_text_names_the_engine(tmp_path: Path) -> None:
    body = (
        'error while handling argument "--draft": the argument has been removed. use --spec-draft-n-max or '
        "--spec-ngram-mod-n-max\n\nusage:\n\n\nto show complete usage, run with -h\n"
    )
    assert report(tmp_path, body, head="")["engine"] == "llamacpp"


@pytest.mark.parametrize(
    ("code", "signal", "category", "says"),
    [(1, None, "exited", "code 1"), (None, 11, "crashed", "SIGSEGV"), (None, 9, "killed", "SIGKILL")],
)
def test_an_unexplained_death_is_categorised_by_how_it_ended(
    code: int | None, signal: int | None, category: str, says: str
) -> None:
    from bootwatch.pipeline import Analyzer

    a = Analyzer(clock="arrival")
    a.feed(b"starting\n", 1.0)
    a.tracker.exited(code, signal)
    f = a.summary().to_json()["failure"]
    assert f["category"] == category and says in f["text"], f


def test_the_command_line_names_the_engine_until_a_line_does() -> None:
    from bootwatch.pipeline import Analyzer

    a = Analyzer(clock="arrival")
    a.tracker.hint_command(["/opt/llama/bin/llama-server", "-m", "m.gguf", "--no-such-flag"])
    a.feed(b"error: invalid argument: --no-such-flag\n", 1.0)
    a.tracker.exited(1, None)
    s = a.summary().to_json()
    assert s["engine"] == "llamacpp" and s["failure"]["text"] == "error: invalid argument: --no-such-flag"


# The first fatal signal wins over the echoes of it in other processes (lines from tests/fixtures/real_lines/generic.log
# and vLLM's own wrapper): a child's faulthandler report, then the parent's EOFError on the pipe and its wrapper.
FAULT_THEN_ECHOES = (
    "Fatal Python error: Bus error\n\n"
    "Thread 0x00007f5d1a7fc640 (most recent call first):\n"
    '  File "/usr/lib/python3.12/threading.py", line 355 in wait\n\n'
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.12/multiprocessing/connection.py", line 430, in _recv_bytes\n'
    "    raise EOFError\n"
    "EOFError\n"
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
)
RAY_SIGSEGV_THEN_ACTOR_DIED = (
    "(RayWorkerWrapper pid=246, ip=10.99.48.141) *** SIGSEGV received at time=1742365186 on cpu 33 ***\n"
    "(RayWorkerWrapper pid=246, ip=10.99.48.141) PC: @ 0x7f32d184f03d (unknown) ncclLaunchPrepare()\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.12/site-packages/ray/_private/worker.py", line 2771, in get\n'
    "    raise value\n"
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task\n"
)


@pytest.mark.parametrize(
    ("body", "cause"),
    [
        (FAULT_THEN_ECHOES, "Fatal Python error: Bus error"),
        (RAY_SIGSEGV_THEN_ACTOR_DIED, "*** SIGSEGV received at time=1742365186 on cpu 33 ***"),
        # zsh's job line once the shell saw the server die, after the parent's echo of its child's death
        (
            "[2025-05-01 05:11:20] Received sigquit from a child process. It usually means the child failed.\n"
            "[1]    1322597 segmentation fault (core dumped)  python run_pokemon_trainer.py\n",
            "[1]    1322597 segmentation fault (core dumped)  python run_pokemon_trainer.py",
        ),
        (
            "fish: Job 1, “python test-tf11-tfshoulduse-cr…” terminated by signal SIGSEGV (Address boundary error)\n",
            "fish: Job 1, “python test-tf11-tfshoulduse-cr…” terminated by signal SIGSEGV (Address boundary error)",
        ),
    ],
)
def test_the_first_fatal_signal_wins_over_its_echoes(tmp_path: Path, body: str, cause: str) -> None:
    head = SGLANG_START if "sigquit" in body else START
    s = report(tmp_path, body, head=head)
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"] == cause, s["failure"]


def test_an_echo_alone_is_still_the_cause(tmp_path: Path) -> None:
    s = report(tmp_path, "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task\n")
    assert s["verdict"] == "failed" and s["failure"]["text"].startswith("ray.exceptions.ActorDiedError")


def test_the_gguf_readers_tensor_line_beats_the_loaders_generic_error(tmp_path: Path) -> None:
    head = "main: loading model\nllama_model_loader: loaded meta data with 36 key-value pairs and 197 tensors from m.gguf\n"
    body = (
        "gguf_init_from_file_impl: tensor 'output.weight' has invalid ggml type 142 (NONE)\n"
        "llama_model_load: error loading model: failed to load model\n"
        "main: exiting due to model loading error\n"
    )
    s = report(tmp_path, body, head=head)
    assert s["verdict"] == "failed" and s["engine"] == "llamacpp", s
    assert s["failure"]["text"] == "gguf_init_from_file_impl: tensor 'output.weight' has invalid ggml type 142 (NONE)"
    assert s["failure"]["category"] == "weights"


# A launcher that could not run the server's command: what env, nohup, timeout and a shell's exec really print
# here (run for real, so the rule meets the words of this machine's coreutils and shells, not a memory of them).
@pytest.mark.parametrize(
    "launcher",
    [
        ["env", "vllm-typo", "serve", "m"],
        ["env", "LC_ALL=C", "env", "vllm-typo"],
        ["nohup", "vllm-typo"],
        ["timeout", "5", "vllm-typo"],
        ["sh", "-c", "exec vllm-typo"],
        ["bash", "-c", "./vllm-typo"],
    ],
)
def test_a_command_a_launcher_could_not_run_is_not_a_weights_failure(tmp_path: Path, launcher: list[str]) -> None:
    import shutil
    import subprocess

    from bootwatch.pipeline import Analyzer

    if not shutil.which(launcher[0]):
        pytest.skip(f"{launcher[0]} is not installed")
    p = subprocess.run(launcher, cwd=tmp_path, capture_output=True, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
    assert p.returncode in (126, 127) and p.stderr, p
    a = Analyzer(clock="arrival")
    a.feed(p.stderr, 1.0)
    a.tracker.exited(p.returncode, None)
    f = a.summary().to_json()["failure"]
    assert f["category"] == "environment" and f["line_no"] == 1, (p.stderr, f)  # was "weights" ("No such file")


def test_an_exit_with_no_line_is_said_without_a_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    log = tmp_path / "e.log"
    p = subprocess.run(
        [sys.executable, "-m", "bootwatch", "run", "--log", str(log), "--", "sh", "-c", "exit 3"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "BOOTWATCH_HOME": str(tmp_path / "home"), "NO_COLOR": "1"},
        timeout=60,
    )
    assert p.returncode == 1, p
    assert "FAILED during startup (exited): process exited with code 3" in p.stdout, p.stdout
    assert "line None" not in p.stdout + p.stderr


# N13: every fatal signal a shell names, not only Killed and Segmentation fault, in each shell's own wording (real
# lines from tests/fixtures/real_lines/generic.log: bash, dash, zsh and fish on this project's machine), and the
# red team's forms.
SHELL_DEATH_LINES = [
    "Bus error (core dumped)",
    "Floating point exception (core dumped)",
    "Illegal instruction",
    "bash: line 1: 22912 Illegal instruction     (core dumped) python3 -c 'import os,signal; os.kill(os.getpid(), "
    "signal.SIGILL)'",
    "bash: line 1: 21727 Floating point exception(core dumped) python3 -c 'import os,signal; os.kill(os.getpid(), "
    "signal.SIGFPE)'",
    "bash: line 1: 18135 Bus error               python3 -c 'import os,signal; os.kill(os.getpid(), signal.SIGBUS)'",
    "/opt/start.sh: line 3:  4242 Illegal instruction     (core dumped) python3 -m vllm.entrypoints.openai.api_server",
    'zsh: floating point exception  sh -c "kill -FPE \\$\\$"',
    'zsh: bus error (core dumped)  sh -c "kill -BUS \\$\\$"',
    '[1]  + illegal hardware instruction  sh -c "kill -ILL \\$\\$"',
    "fish: Job 1, 'python3 -c \"import os,signal; o…' terminated by signal SIGKILL (Forced quit)",
    "fish: Process 22744, 'python3' from job 2, 'python3 -c \"import os,signal; o…' terminated by signal SIGILL "
    "(Illegal instruction)",
    'Job 1, "python -m vllm" terminated by signal SIGKILL',
]


@pytest.mark.parametrize("line", SHELL_DEATH_LINES)
def test_a_shells_line_for_any_fatal_signal_is_a_death(tmp_path: Path, line: str) -> None:
    s = report(tmp_path, line + "\n")
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"] == line


@pytest.mark.parametrize(
    "line",
    [
        "INFO 08-12 10:11:13 [worker.py:7] on a Bus error the loader retries once",
        "WARNING 08-12 10:11:13 [cpu.py:40] Illegal instruction sets are disabled: AVX512",
        "Floating point exception flags cleared before the kernel warm-up",
    ],
)
def test_prose_that_names_a_signal_is_not_a_death(tmp_path: Path, line: str) -> None:
    assert report(tmp_path, line + "\n")["verdict"] == "incomplete"


def test_a_traceback_logged_with_a_harmless_warning_is_not_a_failure(tmp_path: Path) -> None:
    # TGI 0.8 warns "Could not import Flash Attention enabled models" with its exception (loguru's "> File" frame)
    # and goes on loading: the shard is later SIGKILLed (host OOM), which is the cause, not the ImportError.
    log = CORPUS / "tgi" / "v0.8-compose-cpu-starcoder-flash-import-warn-traceback-then-sigkill.log"
    lines = log.read_text("utf-8").split("\n")
    upto = next(i for i, x in enumerate(lines) if "Waiting for shard 0 to be ready" in x)
    head = tmp_path / "head.log"
    head.write_text("\n".join(lines[: upto + 1]) + "\n")
    assert analyze_path(head)["verdict"] == "incomplete"
    s = analyze_path(log)
    assert s["verdict"] == "failed" and s["failure"]["text"].startswith(
        "Shard process was signaled to shutdown with signal 9"
    )


# systemd's journal of a service whose main process ended (real lines: tests/corpus/ollama/v0.5.7-journald-*): the
# unit's own last line says why; an exit with status 0 is a clean stop, not a death.
JOURNAL = (
    "Feb 09 18:55:00 asus ollama[11630]: Couldn't find '/var/lib/ollama/.ollama/id_ed25519'. Generating new private key.\n"
    "Feb 09 18:55:00 asus ollama[11630]: Error: could not create directory mkdir /var/lib/ollama: permission denied\n"
    "Feb 09 18:55:00 asus systemd[1]: ollama.service: Main process exited, code={how}\n"
)


def test_a_services_main_process_that_exits_badly_is_a_death_explained_by_its_last_error(tmp_path: Path) -> None:
    s = report(tmp_path, JOURNAL.format(how="exited, status=1/FAILURE"))
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"].endswith("Error: could not create directory mkdir /var/lib/ollama: permission denied")


def test_a_services_main_process_that_exits_0_is_no_death(tmp_path: Path) -> None:
    log = JOURNAL.replace("Error: could not create", "note: would create").format(how="exited, status=0/SUCCESS")
    assert report(tmp_path, log)["verdict"] == "incomplete"


GKE_NCCL = CORPUS / "sglang" / "2025-gke-cloud-logging-newest-first-llama31-70b-tp8-fa3-dev-shm-nccl-segment-failed.log"


def _nccl_traceback() -> list[str]:
    """The corpus log's scheduler traceback (Cloud Logging prints it newest first), oldest first, its prefix gone."""
    lines = [x.split("Z ", 1)[1] for x in GKE_NCCL.read_text("utf-8").splitlines() if "Z " in x][::-1]
    start = next(
        i for i, x in enumerate(lines) if x.endswith("Scheduler hit an exception: Traceback (most recent call last):")
    )
    end = next(i for i, x in enumerate(lines) if x.startswith("Error while creating shared memory segment"))
    return lines[start : end + 1]


def test_nccls_last_error_names_the_cause_of_the_exception_torch_raises_for_it(tmp_path: Path) -> None:
    s = report(tmp_path, "\n".join(_nccl_traceback()) + "\n", SGLANG_START)
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"] == "Error while creating shared memory segment /dev/shm/nccl-ufmqwQ (size 7340384)"
    assert s["failure"]["detail"].startswith("torch.distributed.DistBackendError: NCCL error in:")


def test_an_empty_last_error_leaves_the_exception_as_the_cause(tmp_path: Path) -> None:
    s = report(tmp_path, "\n".join(_nccl_traceback()[:-1]) + "\n\n", SGLANG_START)
    assert s["failure"]["text"].startswith("torch.distributed.DistBackendError: NCCL error in:"), s
