#!/usr/bin/env python3
"""Checks the contract examples against docs/*.schema.json.

  check-schemas.py                 valid job examples pass, invalid ones fail, outcome examples pass
  check-schemas.py outcome FILE    every line of FILE (JSON) is a valid outcome ("-" = stdin)
"""
import json
import pathlib
import sys

import jsonschema

root = pathlib.Path(__file__).resolve().parent.parent
docs = root / "docs"


def validator(name):
    schema = json.loads((docs / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def main():
    problems = []
    if len(sys.argv) == 3:
        check = validator(sys.argv[1])
        stream = sys.stdin if sys.argv[2] == "-" else open(sys.argv[2])
        count = 0
        for line in stream:
            if not line.strip():
                continue
            count += 1
            for error in check.iter_errors(json.loads(line)):
                problems.append(f"line {count}: {error.message}")
        if count == 0:
            problems.append("no documents to check")
    else:
        job = validator("job")
        outcome = validator("outcome")
        for path in sorted((docs / "examples/jobs/valid").glob("*.json")):
            for error in job.iter_errors(json.loads(path.read_text())):
                problems.append(f"{path.name}: {error.message}")
        for path in sorted((docs / "examples/jobs/invalid").glob("*.json")):
            if job.is_valid(json.loads(path.read_text())):
                problems.append(f"{path.name}: schema accepts an invalid job")
        for path in sorted((docs / "examples/outcomes").glob("*.json")):
            for error in outcome.iter_errors(json.loads(path.read_text())):
                problems.append(f"{path.name}: {error.message}")
    for problem in problems:
        print(problem)
    sys.exit(1 if problems else 0)


main()
