"""The extraction pipeline (SPEC §3.8): agent tool outputs become working-memory items.

- ``pipeline``: first matching rule → its summarizer → the redaction gate → working memory;
- ``rules`` compile the rules from data into ``rule.ExtractionRule``s, ``rule_overlaps``
  warns of rules that can match the same output;
- ``summarizers``: a tool output becomes a short item;
- ``redaction``: the secret redaction gate every stored text passes.
"""
