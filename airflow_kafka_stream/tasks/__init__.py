"""What the Airflow operators and sensors share: refusals in a task's words, the lag objective's check.

Kept below both so that neither imports the other's package (operators build task groups from sensors).
"""
