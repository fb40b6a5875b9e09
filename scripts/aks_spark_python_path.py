"""Imported at every start of this environment's Python (through aks_spark_python_path.pth, which
scripts/setup-spark-python-path installs), and acting only under the tests (AKS_SPARK_PYTHON_FROM_SITE_PACKAGES=1).

Spark starts each Python process of a driver (the data-source lookup, creation and planning workers, the
streaming source's runner, spark-submit's own driver) with ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip
first on its path. A zip holds no bytecode and Python writes none for it, so every such process compiles
PySpark's modules from source: about 0.8 s of CPU each, 5-6 s a driver. With pip's PySpark, those zips hold the
very files already installed (and compiled) beside this module, so dropping them from the path changes what is
imported not at all, only how fast. Users' drivers keep Spark's behaviour: this runs only for the test suite.
"""

import os
import sys

if os.environ.get("AKS_SPARK_PYTHON_FROM_SITE_PACKAGES") == "1":
    _zips = os.path.realpath(os.path.join(os.path.dirname(__file__), "pyspark", "python", "lib"))
    sys.path[:] = [entry for entry in sys.path if os.path.realpath(os.path.dirname(entry) or ".") != _zips]
