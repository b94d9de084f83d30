"""Rubric synthesis (ARES): documents in, RL instances out (question, reference answer and a
weighted rubric), every rejected candidate kept with the stage and the reason.

Modules: ``schemas`` (wire), ``corpus`` (the built-in Wikipedia corpus), ``stages`` (the pure
checks of stages 1, 4 and 5), ``domains`` (stage 2), ``generator`` (stage 3), ``pipeline``
(the stages in order, with progress), ``repository`` (instances and rejections),
``jobs`` (``rubrics.synthesize``), ``export`` (TRL, verl and OpenRLHF datasets), ``router``
and ``app`` (the component).
"""
