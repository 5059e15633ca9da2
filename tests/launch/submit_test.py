"""launch.submit: Steps carried out in a fresh directory ({dir} replaced, stdin fed,
the first failure's status) or printed for --dry_run."""

import os
import sys

from absl.testing import absltest

from launch import job as job_lib
from launch import submit


class SubmitTest(absltest.TestCase):

  def test_dry_run_text(self):
    steps = [job_lib.Step(("kubectl", "apply", "-f", "{dir}/job.yaml"),
                          files=(("job.yaml", "kind: Job\n"),)),
             job_lib.Step(("sh", "-c", "cat"), stdin="hello\n")]
    self.assertEqual(submit.render(steps),
                     "==> {dir}/job.yaml <==\nkind: Job\n"
                     "$ kubectl apply -f '{dir}/job.yaml'\n"
                     "$ sh -c cat <<'EOF'\nhello\nEOF\n")

  def test_run_writes_files_feeds_stdin_and_stops_at_a_failure(self):
    out = self.create_tempdir().full_path
    record = os.path.join(out, "seen")
    copy = (f"import sys, shutil; shutil.copy(sys.argv[1], {record!r}); "
            f"open({record!r}, 'a').write(sys.stdin.read())")
    steps = [job_lib.Step((sys.executable, "-c", copy, "{dir}/a.txt"),
                          files=(("a.txt", "file\n"),), stdin="stdin\n"),
             job_lib.Step((sys.executable, "-c", "raise SystemExit(7)")),
             job_lib.Step((sys.executable, "-c", f"open({record!r}, 'a').write('never')"))]
    log = open(os.path.join(out, "log"), "w+")
    self.assertEqual(submit.run(steps, out=log), 7)
    with open(record) as f:
      self.assertEqual(f.read(), "file\nstdin\n")
    log.seek(0)
    self.assertIn("exited with status 7; nothing after it ran", log.read())
    log.close()

  def test_a_step_runs_only_where_its_unless_command_fails(self):
    out = self.create_tempdir().full_path
    record = os.path.join(out, "ran")
    write = (sys.executable, "-c", f"open({record!r}, 'a').write('x')")
    exists = (sys.executable, "-c", "raise SystemExit(0)")
    missing = (sys.executable, "-c", "raise SystemExit(1)")
    with open(os.path.join(out, "log"), "w") as log:
      self.assertEqual(submit.run([job_lib.Step(write, unless=exists)], out=log), 0)
      self.assertFalse(os.path.exists(record))  # e.g. the TPU VM exists: not created
      self.assertEqual(submit.run([job_lib.Step(write, unless=missing)], out=log), 0)
    with open(record) as f:
      self.assertEqual(f.read(), "x")
    self.assertEqual(submit.render([job_lib.Step(("create", "t"), unless=("describe", "t"))]),
                     "$ describe t > /dev/null 2>&1 || create t\n")

  def test_a_missing_tool(self):
    with self.assertRaisesRegex(job_lib.LaunchError,
                                "no-such-tool-here is not on PATH; install it, or add "
                                "--dry_run"):
      submit.check_tools([job_lib.Step(("no-such-tool-here", "x"))])
    submit.check_tools([job_lib.Step((sys.executable,))])


if __name__ == "__main__":
  absltest.main()
