"""Code the test modules share (policies, data builders, CLI runners, fixtures, checks).

Why: a test module must never import another test module; what two of them need lives here.
Pytest fixtures shared by several modules are in ``tests.helpers.fixtures``, registered once
for the whole suite by ``tests/conftest.py``.
"""
