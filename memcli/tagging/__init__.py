"""memcli's part-of-speech tagger (:mod:`memcli.tagging.tagger`): what the titles' noun phrases are read by."""
