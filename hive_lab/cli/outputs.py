"""``hive-lab outputs JOB [--download DIR]``: the files a job wrote to its output dir."""

from __future__ import annotations

from ._common import add_server_args, client_from, print_json, reports_errors


def register(subparsers) -> None:
    p = subparsers.add_parser("outputs", help="list a job's output files (--download DIR: copy them there)")
    p.add_argument("job")
    p.add_argument("--download", metavar="DIR", default=None, help="copy every output file into DIR")
    add_server_args(p)
    p.set_defaults(func=run)


@reports_errors
def run(args) -> int:
    client = client_from(args)
    if args.download:
        written = client.download_outputs(args.job, args.download)
        if args.json:
            print_json({"files": [str(p) for p in written]})
        else:
            for path in written:
                print(path)
        return 0
    files = client.outputs(args.job)
    if args.json:
        print_json({"files": files})
        return 0
    for item in files:
        print(f"{item.get('size', 0):>12}  {item['path']}")
    return 0
