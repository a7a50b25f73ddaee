"""Session fixtures shared by every test module (built once per test session)."""

from report_fixtures import lexical_results, sample_corpus  # noqa: F401
from tiny_models import colpali_dir, colqwen, colqwen_dir  # noqa: F401
