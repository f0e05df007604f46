"""Meta-RL algorithms built on Stable-Baselines3 and sb3-contrib."""
