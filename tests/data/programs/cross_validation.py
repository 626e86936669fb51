"""W&B's cross-validation sweep pattern (wandb/examples, examples/wandb-sweeps/sweeps-cross-validation),
written with today's wandb API: fold workers forked before the sweep's run, each clearing the agent's
WANDB_ environment and opening a run of its own (group = the sweep id, its own name); the parent logs
the folds' mean to the sweep's run, whose sweep_id and name it reads."""

import multiprocessing
import os

import wandb

FOLDS = 3


def reset_wandb_env():
    exclude = {"WANDB_PROJECT", "WANDB_ENTITY", "WANDB_API_KEY"}
    for key in list(os.environ.keys()):
        if key.startswith("WANDB_") and key not in exclude:
            del os.environ[key]


def train(sweep_q, worker_q):
    reset_wandb_env()
    sweep_id, sweep_run_name, num, config = worker_q.get()
    run = wandb.init(group=sweep_id, job_type=sweep_run_name, name=f"{sweep_run_name}-{num}", config=config)
    accuracy = config["lr"] * (num + 1)
    run.log({"val_accuracy": accuracy, "fold": num})
    run.log({"val_accuracy": accuracy, "fold": num})
    run.finish()
    sweep_q.put(accuracy)


def main():
    sweep_q = multiprocessing.Queue()
    workers = []
    for _ in range(FOLDS):
        q = multiprocessing.Queue()
        p = multiprocessing.Process(target=train, kwargs=dict(sweep_q=sweep_q, worker_q=q))
        p.start()
        workers.append((q, p))

    sweep_run = wandb.init(config={"lr": 0.1})
    sweep_id = sweep_run.sweep_id or "unknown"
    sweep_run_name = sweep_run.name or sweep_run.id or "unknown_2"
    print("sweep id:", sweep_id, "sweep url:", sweep_run.sweep_url, flush=True)
    metrics = []
    for num, (q, p) in enumerate(workers):
        q.put((sweep_id, sweep_run_name, num, dict(sweep_run.config)))
        metrics.append(sweep_q.get())
        p.join()
    sweep_run.log({"val_accuracy": sum(metrics) / len(metrics)})
    sweep_run.finish()


if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    main()
