"""memcli's own reader: a MiniLM fine-tuned for extractive question answering, run with numpy."""
