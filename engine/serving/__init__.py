"""The engine across a process or network boundary: frames, the worker, the TCP server, the async client, the dice:// and sglang:// engines."""
