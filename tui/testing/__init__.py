"""What tests (and benchmarks) script a session with: `WorkerLink` and `ScriptedAgent` (`double.py`).

It stands above the worker and the link, as a client would: no production package imports it.
"""
