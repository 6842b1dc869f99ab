"""Plan mode's flags on a command line: +plan=true, and the admission rate given by plan_accept=<rate>
or measured in a finished run by plan_from=<folder> (ms-run's and ms-data's)."""

import re
from pathlib import Path
from typing import Optional, Sequence

from ms.common.errors import UserError
from ms.plan.measured import Measured, measured

PLAN = re.compile(r"\+{0,2}plan=(.*)")
ACCEPT = re.compile(r"\+{0,2}plan_accept=(.*)")
FROM = re.compile(r"\+{0,2}plan_from=(.*)")
TRUE, FALSE = ("true", "yes", "1"), ("false", "no", "0")


def take_plan_flags(args: Sequence[str]) -> tuple[list[str], bool, Optional[float | Measured]]:
    """(the other arguments, whether plan mode is on, the acceptance rate given by plan_accept or
    measured in the finished run plan_from names)."""
    rest, plan, accept, run = [], False, None, None
    for arg in args:
        if found := PLAN.fullmatch(arg):
            value = found.group(1).lower()
            if value not in TRUE + FALSE:
                raise UserError(f"invalid setting plan={found.group(1)}: must be true or false")
            plan = value in TRUE
        elif found := ACCEPT.fullmatch(arg):
            try:
                accept = float(found.group(1))
            except ValueError:
                accept = -1.0
            if not 0 <= accept <= 1:
                raise UserError(f"invalid setting plan_accept={found.group(1)}: must be a rate from 0 to 1")
        elif found := FROM.fullmatch(arg):
            run = Path(found.group(1))
        else:
            rest.append(arg)
    if (accept is not None or run is not None) and not plan:
        raise UserError(f"{'plan_accept' if run is None else 'plan_from'} is a setting of plan mode: add +plan=true")
    if accept is not None and run is not None:
        raise UserError("plan_accept and plan_from both set the admission rate: give one of them")
    return rest, plan, accept if run is None else measured(run)
