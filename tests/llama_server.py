"""Run llama-cpp-python's OpenAI-compatible server for the tests, on loopback.

It loads the model through llama-cpp-python's own code, so memcli's CPU
buffer setting is applied around it: builds with AMX kernels crash on the
default model otherwise (see ``memcli.llm.llamacpp.extra_buffers_wanted``).
"""

import runpy

from memcli.llm.llamacpp import extra_buffer_params, extra_buffers_wanted

if __name__ == "__main__":
    with extra_buffer_params(extra_buffers_wanted("auto")):
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
