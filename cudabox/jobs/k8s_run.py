"""`cudabox run --on k8s`: create the Job, stream its pod's log, exit with how it ended.

Uses the official `kubernetes` client (the optional extra `cudabox[k8s]`,
imported only here) with the user's kubeconfig, exactly as kubectl would:
create the Job, watch its pod until it starts (saying why it waits: pending,
unschedulable, image pull), follow the log, then read the Job's outcome and
the container's exit code. Ctrl-C deletes the Job (and so its pod).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..errors import EnvironmentProblem, InputError

PULL_ERRORS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError")


def _client(kubeconfig: str | None, context: str | None):
    try:
        from kubernetes import client, config
    except ImportError:
        raise EnvironmentProblem("the Kubernetes client is not installed",
                                 hint="pip install 'cudabox[k8s]'") from None
    path = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    first = path.split(os.pathsep)[0]
    if not Path(first).is_file():
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
            return client, "default"
        raise EnvironmentProblem(f"no kubeconfig at {first}", hint="set KUBECONFIG or pass --kubeconfig")
    try:
        config.load_kube_config(config_file=first, context=context)
        _, active = config.list_kube_config_contexts(config_file=first)
    except Exception as exc:  # noqa: BLE001 - ConfigException and YAML errors alike
        raise InputError(f"{first}: cannot use this kubeconfig ({exc})") from None
    if context:
        contexts, _ = config.list_kube_config_contexts(config_file=first)
        active = next((c for c in contexts if c["name"] == context), active)
    return client, (active or {}).get("context", {}).get("namespace") or "default"


def submit(manifest: dict, *, namespace: str | None = None, kubeconfig: str | None = None,
           context: str | None = None, detach: bool = False, out=None, err=None, poll: float = 1.0,
           start_timeout: float = 3600) -> int:
    """Create the Job; unless detached, follow it to the end and return the container's exit code."""
    out = out or sys.stdout.buffer
    err = err or sys.stderr
    client, default_ns = _client(kubeconfig, context)
    ns = namespace or manifest["metadata"].get("namespace") or default_ns
    name = manifest["metadata"]["name"]
    batch, core = client.BatchV1Api(), client.CoreV1Api()
    from kubernetes.client.rest import ApiException

    try:
        batch.create_namespaced_job(ns, manifest)
    except ApiException as exc:
        if exc.status == 409:
            raise InputError(f"Job {ns}/{name} already exists; delete it (kubectl delete job -n {ns} {name}) "
                             "or pass --name") from None
        raise EnvironmentProblem(f"the API server refused the Job: {exc.status} {exc.reason}") from None
    err.write(f"cudabox: created Job {ns}/{name}\n")
    if detach:
        print(name)
        return 0
    try:
        pod = _wait_for_pod(core, ns, name, err, poll, start_timeout)
        if pod is not None:
            _stream_log(core, ns, pod, out)
        return _outcome(batch, core, ns, name, err, poll)
    except KeyboardInterrupt as exc:
        batch.delete_namespaced_job(name, ns, propagation_policy="Background")
        err.write(f"\ncudabox: interrupted: deleted Job {ns}/{name}\n")
        return getattr(exc, "exit_code", 130)  # 143 for SIGTERM, 129 for SIGHUP (cudabox.interrupt)
    except ApiException as exc:
        raise EnvironmentProblem(f"Job {ns}/{name}: the API server answered {exc.status} {exc.reason} while "
                                 "following it", hint=f"kubectl describe job -n {ns} {name}") from None


def _wait_for_pod(core, ns: str, job: str, err, poll: float, timeout: float) -> str | None:
    """Watch the Job's pod until its container runs or ends; say why while it waits."""
    from kubernetes import watch

    said, deadline = set(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        stream = watch.Watch().stream(core.list_namespaced_pod, ns, label_selector=f"job-name={job}",
                                      timeout_seconds=max(1, int(min(60, deadline - time.monotonic()))))
        for event in stream:
            pod = event["object"]
            phase = pod.status.phase
            note = _waiting_note(pod)
            if note and note not in said:
                said.add(note)
                err.write(f"cudabox: pod {pod.metadata.name}: {note}\n")
                if any(reason in note for reason in PULL_ERRORS):
                    raise EnvironmentProblem(f"pod {pod.metadata.name} cannot start: {note}",
                                             hint="push the image where the cluster pulls from (--registry)")
            if phase in ("Running", "Succeeded", "Failed"):
                err.write(f"cudabox: pod {pod.metadata.name} {phase}"
                          + (f" on {pod.spec.node_name}" if pod.spec and pod.spec.node_name else "") + "\n")
                return pod.metadata.name
        time.sleep(poll)
    raise EnvironmentProblem(f"Job {ns}/{job}: no pod started within {timeout:.0f}s")


def _waiting_note(pod) -> str | None:
    for cond in pod.status.conditions or []:
        if cond.type == "PodScheduled" and cond.status == "False" and cond.message:
            return f"{cond.reason or 'Unschedulable'}: {cond.message}"
    for cs in pod.status.container_statuses or []:
        waiting = cs.state.waiting if cs.state else None
        if waiting and waiting.reason and waiting.reason != "ContainerCreating":
            return f"{waiting.reason}: {waiting.message or ''}".rstrip(": ")
    return "Pending" if pod.status.phase == "Pending" else None


def _stream_log(core, ns: str, pod: str, out) -> None:
    resp = core.read_namespaced_pod_log(pod, ns, follow=True, _preload_content=False)
    try:
        for chunk in resp.stream(4096):
            out.write(chunk)
            out.flush()
    finally:
        resp.release_conn()


def _outcome(batch, core, ns: str, job: str, err, poll: float) -> int:
    """Wait for the Job to finish; the exit code is the container's (1 for a failure without one)."""
    while True:
        status = batch.read_namespaced_job_status(job, ns).status
        if status.succeeded or status.failed:
            break
        time.sleep(poll)
    pods = core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items
    code, reason = None, None
    for pod in pods:
        for cs in pod.status.container_statuses or []:
            term = cs.state.terminated if cs.state else None
            if term is not None:
                code, reason = term.exit_code, term.reason
    if status.succeeded:
        return 0 if code is None else code
    code = code or 1
    conditions = [c.message or c.reason for c in status.conditions or [] if c.type == "Failed" and c.status == "True"]
    err.write(f"cudabox: error: Job {ns}/{job} failed (exit code {code}"
              + (f", {reason}" if reason else "") + (f"; {conditions[0]}" if conditions else "") + ")\n")
    return code
