"""What a user calls is importable from the package itself."""

import geocont


def test_the_package_exports_what_a_user_calls():
    from geocont import analyzer, config, lm, training

    homes = {
        "analyze": analyzer,
        "summary": analyzer,
        "run_mlp": training,
        "run_sweep": training,
        "run_lm": lm,
        "MLPRunConfig": config,
        "LMRunConfig": config,
        "OptimizerConfig": config,
        "TransformerShape": config,
    }
    for name, module in homes.items():
        assert getattr(geocont, name) is getattr(module, name), name
    assert set(homes) <= set(geocont.__all__) and set(homes) <= set(dir(geocont))


def test_an_unknown_name_is_an_attribute_error():
    try:
        geocont.analyse  # noqa: B018 - the attribute access is the test
    except AttributeError as error:
        assert "analyse" in str(error)
    else:
        raise AssertionError("geocont.analyse should not exist")
