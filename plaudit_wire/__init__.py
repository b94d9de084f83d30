"""What both sides of Plaudit's HTTP API share: pydantic and the standard library only.

The server (``services``, ``judges``) and the light trainer client (``trainer_client``) import
these modules, so the two agree by construction instead of by a copy (issue 20):

- the public API's request and answer models: :mod:`plaudit_wire.schemas` (the shared
  field types, pages and base models), then one module per service (:mod:`~plaudit_wire.judge`,
  :mod:`~plaudit_wire.rewards`, :mod:`~plaudit_wire.diversity`, :mod:`~plaudit_wire.ordinal`,
  :mod:`~plaudit_wire.protocols`, :mod:`~plaudit_wire.rubrics`, :mod:`~plaudit_wire.synthesis`,
  :mod:`~plaudit_wire.memory`, :mod:`~plaudit_wire.runs`, :mod:`~plaudit_wire.jobs`);
- :mod:`plaudit_wire.retry`: the one retry policy (exponential backoff with full jitter that
  honours ``Retry-After``) and the one ``Retry-After`` parser;
- :mod:`plaudit_wire.text`: end-of-turn markers and the 0..1 mapping of a reward;
- :mod:`plaudit_wire.templates`: the chat templates a decoded prompt is unwrapped from.
"""
