"""Names and modules that moved this round still import from their old paths, warned, and are the new objects."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

from airflow_kafka_stream.moved import resolve

#: old module -> (names it served, where they live now)
OLD_MODULES = {
    "airflow_kafka_stream.operators.refusals": {name: f"airflow_kafka_stream.tasks.refusals:{name}" for name in (
        "PARAMETER_OF_SETTING", "parameters_of", "parameter_for", "parameter_text", "in_parameters",
        "refusals_name_parameters")},
    "airflow_kafka_stream.operators.objective_check": {
        name: f"airflow_kafka_stream.tasks.objective_check:{name}"
        for name in ("UNSET", "refuse_bad_objective", "check_objective")},
    "airflow_kafka_stream.operators.flags": {"as_flag": "airflow_kafka_stream.core.values:flag"},
}
#: old module -> name -> its new home, in modules that stay
OLD_NAMES = {
    "airflow_kafka_stream.source.source": {name: f"airflow_kafka_stream.source.stream_reader:{name}"
                                           for name in ("KafkaRange", "parse_offsets")},
    "airflow_kafka_stream.ops.standby": {
        "HANDOVER_POLL_SECONDS": "airflow_kafka_stream.ops.upgrade_options:HANDOVER_POLL_SECONDS"},
    "airflow_kafka_stream.ops.watch": {name: f"airflow_kafka_stream.core.job_watch:WaitStatus.{name}"
                                       for name in ("WAITING", "SUCCESS", "FAILED", "TIMEOUT")},
    "airflow_kafka_stream.kafka.metadata": {
        "isolation_level": "airflow_kafka_stream.kafka.clients:isolation_level"},
    "airflow_kafka_stream.runtime.rehearsal": {
        "BUILT_IN_SINKS": "airflow_kafka_stream.runtime.rehearsal_sink:BUILT_IN_SINKS"},
}


@pytest.mark.parametrize("old", sorted(OLD_MODULES))
def test_an_old_module_imports_warned_with_every_name(old):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    new_homes = {target.partition(":")[0] for target in OLD_MODULES[old].values()}
    assert any(issubclass(w.category, DeprecationWarning) and all(home in str(w.message) for home in new_homes)
               for w in seen), [str(w.message) for w in seen]
    for name, target in OLD_MODULES[old].items():
        assert getattr(module, name) is resolve(target), name


@pytest.mark.parametrize(("old", "name"), [(old, name) for old, names in sorted(OLD_NAMES.items()) for name in names])
def test_an_old_name_imports_warned_and_is_the_new_object(old, name):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} is deprecated"):
        found = getattr(module, name)
    assert found is resolve(OLD_NAMES[old][name])
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018 - an unknown name is still an AttributeError


def test_the_package_imports_none_of_its_old_paths():
    """The old modules are for users' code; nothing of the package reads them (or a warning would reach users)."""
    from tests.unit.package.test_layers import imports_of, package_modules

    offending = [str(found) for path in package_modules() for found in imports_of(path)
                 if found.name in OLD_MODULES]
    assert not offending, offending
