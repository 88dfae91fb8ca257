"""Who is on the test Hub (tests/hub/conftest.py): two students of two courses and their instructor."""

ANN, BOB, IVY = "hubann", "hubbob", "hubivy"
COURSES = {"cv-101": 1, "nlp-201": 1}  # VC (a course, a Hub group) -> guaranteed GPUs
