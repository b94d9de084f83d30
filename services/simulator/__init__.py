"""The user simulator (Calibrated Interactive RL): simulated users for multi-turn RL, calibrated
to and measured against real human dialogues (issue 14)."""
