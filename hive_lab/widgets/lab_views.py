"""The mime type hive-lab's JupyterLab extension draws itself (labextension/src/notebookviews.ts):
``{"view": "jobs" | "status" | "job", ...}`` beside a widget or HTML, ranked before them, so the view is
drawn from the server and stays live whatever became of the kernel that displayed it."""

VIEW_MIME = "application/vnd.hive-lab.view+json"
