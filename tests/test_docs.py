"""The examples in the documentation run and print what the docs say."""

import doctest
import sys

import pytest


@pytest.mark.parametrize("doc", ["language.md", "ir.md", "verification.md"])
def test_doc_examples(root, doc, monkeypatch):
    monkeypatch.setattr(sys, "displayhook", sys.__displayhook__)  # IPython's test shell may have replaced it
    result = doctest.testfile(str(root / "docs" / doc), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
