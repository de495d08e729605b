"""The oracle in a user's test suite: ``assert_estimator`` and ``EstimatorMismatch``. A
re-export of ``advest.oracle.reports.testing``, so that the helper keeps its place in the
oracle's layer (it is the oracle's ``check`` plus a comparison) while users import it by the
short name."""

from advest.oracle.reports.testing import EstimatorMismatch, assert_estimator, mismatches

__all__ = ["EstimatorMismatch", "assert_estimator", "mismatches"]
