"""Notebook kernels as scheduled GPU jobs: the job form of a kernel, the REST client the provisioner
uses, and idle culling. The provisioner itself is ``hive_lab_server.kernels.provisioner``."""
