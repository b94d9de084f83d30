"""KARMA: a reward model of how a reply was valued (its karma) given its conversation.

data (load scored conversations and sibling pairs), features (the two variants as text),
encoding (one token layout for training and scoring), training (TRL's RewardTrainer),
evaluation (pair accuracy, per score-ratio bin, within-thread Spearman, baselines), model (load
a trained directory and score batches). Heavy imports (torch, transformers, trl) stay inside
training, model and encoding users, so importing data or evaluation is light.
"""
