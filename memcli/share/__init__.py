"""A store shared through git: the entry merge, sync, history and undo (see :mod:`memcli.share.git`)."""
