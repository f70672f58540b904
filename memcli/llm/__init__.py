"""Model layer: where models come from and the one module that owns llama.cpp."""
