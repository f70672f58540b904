"""Run llama-cpp-python's OpenAI-compatible server for the tests, on loopback.

The server loads the model through llama-cpp-python's own ``Llama`` class,
which has no argument for llama.cpp's extra CPU buffer types; builds with
AMX kernels crash on the default model with them (see
``memcli.llm.runtime.extra_buffers_wanted``). So this helper process, and
only it, sets that model parameter on llama-cpp-python's defaults before the
server starts. memcli itself sets its parameters on the objects it creates.
"""

import runpy

from memcli.llm.runtime import extra_buffers_wanted


def _server_defaults(extra_buffers: bool) -> None:
    import llama_cpp.llama_cpp as low

    original = low.llama_model_default_params

    def defaults():
        params = original()
        params.use_extra_bufts = extra_buffers
        return params

    low.llama_model_default_params = defaults


if __name__ == "__main__":
    _server_defaults(extra_buffers_wanted("auto"))
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
