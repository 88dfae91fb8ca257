"""Where jobs run: the launchers (local, Docker, Slurm), isolation, the Slurm clients, the staging of a job's
files, and what a task's environment gets at launch (its platform's variables, its unsealed secrets)."""
