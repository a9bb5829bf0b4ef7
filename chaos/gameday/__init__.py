"""Game days: a facilitated run of several experiments, in order, with pauses and approval gates
between them, inside a time window, stoppable from the cluster. `kilocard gameday run PLAN` and
`kilocard gameday schedule PLAN --cron ...` are built on this package.

    title: weekly resilience drill                    # required
    description: ...                                  # optional
    notes: ...                                        # for the facilitator
    window:                                           # optional; outside it nothing starts (window.py)
      days: [mon, tue, wed, thu, fri]
      from: "10:00"                                   # quoted: YAML reads 10:00 as a number
      to: "16:00"
      timezone: Asia/Shanghai                         # required with days, from or to
      not_before: 2025-06-02T10:00:00+08:00           # ISO 8601 with an offset
      not_after: 2025-06-30T16:00:00+08:00
    control: {namespace: kilocard-system, name: gameday-control}   # kilocard.io/abort: "true" aborts the rest
    steps:                                            # each exactly one of experiment, pause, approve
    - experiment: ../s1-kill-one-replica.yaml         # relative to this file's folder
      vars: {budget_seconds: 90}                      # the runner's --var (a number stays a number)
      continue_on_failure: false                      # default: a failed experiment skips the rest
      name: kill one replica
      note: watch the TTFT panel
    - pause: 15                                       # seconds, above 0
    - approve: the on-call SRE agrees to go on        # what the facilitator confirms
      timeout: 600                                    # required: no answer in time aborts the game day
      via: configmap                                  # or terminal (the default): y/yes approves
      configmap: {namespace: kilocard-system, name: gameday-gates}   # kilocard.io/approved: step-3

Modules: plan (the file and its checks), window, gates (terminal and ConfigMap answers, the
abort-all switch), day (running it: GameDay, Outcome, exit codes), journal (where its record goes),
cron and cronjob (`schedule`: the manifests of a CronJob that runs it unattended), view (rows and
the end screen, with rich).
"""

from chaos.gameday.cronjob import dump, schedule
from chaos.gameday.day import Clock, GameDay, Observer, Outcome, Quiet, RunOne, Status, SystemClock, run
from chaos.gameday.plan import ApproveStep, ConfigMapRef, ExperimentStep, PauseStep, Plan, Step, load
from chaos.gameday.window import Window

__all__ = [
    "ApproveStep",
    "Clock",
    "ConfigMapRef",
    "ExperimentStep",
    "GameDay",
    "Observer",
    "Outcome",
    "PauseStep",
    "Plan",
    "Quiet",
    "RunOne",
    "Status",
    "Step",
    "SystemClock",
    "Window",
    "dump",
    "load",
    "run",
    "schedule",
]
