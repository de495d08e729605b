"""What the oracle hands back: ``report`` (``check``: which properties run at which N and dtype)
and ``token_report``, ``verdicts`` (the table), ``schema`` (the JSON document and
``--compare``), ``cli`` and ``commands`` (``advest check``, ``demo``, ``bench``), ``testing`` and
``pytest_plugin`` (``assert_estimator`` and the fixture), ``catalogue`` (the registry's rows for
the tests and the docs), ``demo``."""
