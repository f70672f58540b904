"""The runtime's view inside the model, for latent memory selection (:mod:`memcli.kv.latent`): the
attention's shape, the queries of a prompt's tokens (llama.cpp's eval callback on a context of its
own) and the keys a saved sequence state holds. Part of :class:`memcli.llm.runtime.LlamaRuntime`
(a mixin over its model and context), so llama.cpp is still touched only by the runtime."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

from memcli.errors import ConfigError


def as_float(value: Any) -> float | None:
    """A GGUF metadata value as a number (None when it is not one)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class AttentionProbes:
    """The attention probes of a :class:`~memcli.llm.runtime.LlamaRuntime` (which sets ``_ll``,
    ``_model``, ``metadata``, ``n_ctx``, ``params``, ``sequences`` and ``threads``)."""

    @property
    def attention_shape(self) -> dict:
        """Layers, query heads, key/value heads and head size; ``rope``: ``norm`` or ``neox`` (the
        pairing of rotated dimensions), None for other position encodings."""
        ll, model = self._ll, self._model
        n_head = int(ll.llama_model_n_head(model))
        kind = int(ll.llama_model_rope_type(model))
        return {"n_layer": int(ll.llama_model_n_layer(model)), "n_head": n_head,
                "n_head_kv": int(ll.llama_model_n_head_kv(model)),
                "head_dim": int(ll.llama_model_n_embd(model)) // n_head,
                "rope": {int(ll.LLAMA_ROPE_TYPE_NORM): "norm", int(ll.LLAMA_ROPE_TYPE_NEOX): "neox"}.get(kind),
                "rope_base": float(self.params.rope_freq_base) or as_float(
                    self.metadata.get(f"{self.metadata.get('general.architecture', '')}.rope.freq_base")) or 10000.0,
                "rope_scale": float(self.params.rope_freq_scale) or float(ll.llama_model_rope_freq_scale_train(model))
                or 1.0}

    def queries(self, tokens: list[int]):
        """The attention queries of ``tokens`` decoded alone (positions 0..), before RoPE: an array
        (layers, tokens, query heads, head size).

        They are read with llama.cpp's evaluation callback (the ``Qcur-<layer>`` projection, the first
        tensor of that name in each layer's graph) in a small context of its own on the same weights,
        so the main context and its decoding speed are untouched; ``ggml_backend_tensor_get`` copies
        them from wherever the backend keeps them (host or GPU memory).
        """
        import numpy as np

        shape = self.attention_shape
        if len(tokens) > 256 or not tokens:
            raise ValueError("queries are taken for 1 to 256 tokens")
        if getattr(self, "_probe_ctx", None) is None:
            self._open_probe()
        wanted = {f"Qcur-{i}".encode(): i for i in range(shape["n_layer"])}
        found: dict[int, Any] = {}
        ggml = self._ggml

        def callback(tensor, ask, _user):
            layer = wanted.get(ggml.ggml_get_name(tensor))
            if layer is None or layer in found:
                return False
            if ask:
                return True
            size = int(ggml.ggml_nbytes(tensor))
            if ctypes.c_int32.from_address(tensor).value != 0:  # not F32: not the projection we want
                return True
            data = np.empty(size // 4, dtype=np.float32)
            ggml.ggml_backend_tensor_get(tensor, data.ctypes.data, 0, size)
            found[layer] = data
            return True

        self._probe_callback[0] = callback
        ll = self._ll
        ll.llama_memory_clear(ll.llama_get_memory(self._probe_ctx), True)
        array = (ll.llama_token * len(tokens))(*tokens)
        try:
            if ll.llama_decode(self._probe_ctx, ll.llama_batch_get_one(array, len(tokens))) != 0:
                raise RuntimeError("llama_decode failed while taking queries")
        finally:
            self._probe_callback[0] = None
        if len(found) != shape["n_layer"]:
            raise RuntimeError(f"llama.cpp showed the queries of {len(found)} of {shape['n_layer']} layers")
        d, heads = shape["head_dim"], shape["n_head"]
        return np.stack([found[i].reshape(len(tokens), heads, d) for i in range(shape["n_layer"])])

    def _open_probe(self) -> None:
        ll = self._ll
        from llama_cpp import llama_cpp as binding

        path = Path(binding.__file__).parent / "lib"
        names = sorted(path.glob("libggml-base.*")) + sorted(path.glob("ggml-base.*"))
        if not names:
            raise ConfigError("this llama-cpp-python install has no ggml-base library next to llama.cpp")
        ggml = ctypes.CDLL(str(names[0]))
        ggml.ggml_get_name.restype = ctypes.c_char_p
        ggml.ggml_get_name.argtypes = [ctypes.c_void_p]
        ggml.ggml_nbytes.restype = ctypes.c_size_t
        ggml.ggml_nbytes.argtypes = [ctypes.c_void_p]
        ggml.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
        self._ggml = ggml
        self._probe_callback = [None]
        slot = self._probe_callback

        def dispatch(tensor, ask, user):
            try:
                return bool(slot[0](tensor, ask, user)) if slot[0] is not None else False
            except Exception:  # an exception must not cross into C
                return False

        self._probe_cb = ll.ggml_backend_sched_eval_callback(dispatch)
        params = ll.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = 256
        params.n_threads = params.n_threads_batch = self.threads
        params.flash_attn_type = self.params.flash_attn_type
        params.cb_eval = self._probe_cb
        params.cb_eval_user_data = None
        self._probe_ctx = ll.llama_init_from_model(self._model, params)
        if not self._probe_ctx:
            raise ConfigError("cannot create llama.cpp's small context for taking queries")

    def state_keys(self, state: bytes | bytearray | memoryview):
        """(positions, keys) of the cells in a sequence state (:meth:`state_get`): keys as an array
        (layers, cells, key/value heads, head size), as llama.cpp stores them (after RoPE).

        Reads llama.cpp's sequence-state layout: after a few header words, streams, each a cell count,
        per cell its position and sequence ids, then the number of layers and per layer the key type,
        row size and rows. The header's length has changed between llama.cpp versions, so the first
        few word offsets are tried and the one whose cells and layers add up is used. Only F16 and
        F32 keys are read; a state that does not parse raises ValueError.
        """
        problem = "the state holds no cells"
        for skip in range(4):
            try:
                return self._parse_keys(state, 4 * skip)
            except ValueError as exc:
                problem = str(exc)
        raise ValueError(f"cannot read the keys of this llama.cpp state: {problem}")

    def _parse_keys(self, state: bytes | bytearray | memoryview, at: int):
        import numpy as np

        shape = self.attention_shape
        view = memoryview(state)

        def take(fmt: str, n: int = 1):
            nonlocal at
            size = np.dtype(fmt).itemsize * n
            if at + size > len(view):
                raise ValueError("the state ends early")
            out = np.frombuffer(view[at:at + size], dtype=fmt)
            at += size
            return out

        streams = int(take("<u4")[0])
        if not 1 <= streams <= self.sequences:
            raise ValueError(f"{streams} streams")
        for _ in range(streams):
            cells = int(take("<u4")[0])
            if cells == 0:
                continue
            if cells > self.n_ctx:
                raise ValueError(f"{cells} cells")
            positions = np.empty(cells, dtype=np.int64)
            for i in range(cells):
                positions[i] = int(take("<i4")[0])
                ids = int(take("<u4")[0])
                if ids > self.sequences:
                    raise ValueError(f"a cell in {ids} sequences")
                at += 4 * ids
            v_trans, layers = (int(x) for x in take("<u4", 2))
            if v_trans > 1 or layers != shape["n_layer"]:
                raise ValueError(f"the state has {layers} layers, the model {shape['n_layer']}")
            width = shape["n_head_kv"] * shape["head_dim"]
            keys = np.empty((layers, cells, width), dtype=np.float32)
            for layer in range(layers):
                kind = int(take("<i4")[0])
                row = int(take("<u8")[0])
                dtype = {0: "<f4", 1: "<f2"}.get(kind)
                if dtype is None or row != width * np.dtype(dtype).itemsize:
                    raise ValueError(f"keys of type {kind} ({row} bytes a row) are not read here")
                keys[layer] = take(dtype, cells * width).reshape(cells, width)
            return positions, keys.reshape(layers, cells, shape["n_head_kv"], shape["head_dim"])
        raise ValueError("the state holds no cells")

    # ------------------------------------------------------------ scoring

