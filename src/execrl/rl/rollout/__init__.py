"""From prompts to scored episodes: which prompts to draw (`prompts`), the one rollout path
(`rollouts`) over each environment's episode source (`episode_sources`, the environments
themselves in `rl.episodes`), what an episode becomes for the trainer (`scored`: `Scored`) and
the groups of a prompt's episodes every process sees (`groups`)."""
