"""Where jobs run: the launchers (local, Docker, Slurm), isolation and the Slurm clients."""
