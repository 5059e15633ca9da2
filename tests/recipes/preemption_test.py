"""The preemption notice: SIGTERM recorded while entered, the old handler back after
(and given a request the loop did not act on); outside it, SIGTERM exits 143."""

import os
import signal

from absl.testing import absltest

from recipes import preemption


class NoticeTest(absltest.TestCase):

  def outer_handler(self, received):
    """Installs, for this test, a SIGTERM handler that appends to `received`."""
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    self.addCleanup(signal.signal, signal.SIGTERM, previous)
    return signal.getsignal(signal.SIGTERM)

  def test_sigterm_is_recorded_not_fatal(self):
    received = []
    before = self.outer_handler(received)
    with self.assertRaises(RuntimeError):
      with preemption.Notice() as notice:
        self.assertFalse(notice.requested)
        os.kill(os.getpid(), signal.SIGTERM)  # delivered before kill() returns
        self.assertTrue(notice.requested)
        self.assertEqual(notice.signal, signal.SIGTERM)
        raise RuntimeError("the trainer saves and raises Preempted")
    self.assertIs(signal.getsignal(signal.SIGTERM), before)
    self.assertEqual([], received)  # acted on inside: not delivered again

  def test_a_request_the_loop_did_not_act_on_goes_to_the_outer_handler(self):
    # A SIGTERM after the loop's last look (the last epoch's checkpoint) is not lost.
    received = []
    before = self.outer_handler(received)
    with preemption.Notice():
      os.kill(os.getpid(), signal.SIGTERM)
      self.assertEqual([], received)
    self.assertEqual([signal.SIGTERM], received)
    self.assertIs(signal.getsignal(signal.SIGTERM), before)

  def test_outside_the_loop_sigterm_exits_143(self):
    self.addCleanup(signal.signal, signal.SIGTERM, signal.getsignal(signal.SIGTERM))
    preemption.exit_on_sigterm()
    with self.assertRaises(SystemExit) as stopped:
      os.kill(os.getpid(), signal.SIGTERM)
    self.assertEqual(143, stopped.exception.code)
    with self.assertRaises(SystemExit):  # the loop's notice ends in the same exit
      with preemption.Notice():
        os.kill(os.getpid(), signal.SIGTERM)

  def test_an_ignored_sigterm_stays_ignored(self):
    self.addCleanup(signal.signal, signal.SIGTERM, signal.signal(signal.SIGTERM,
                                                                  signal.SIG_IGN))
    preemption.exit_on_sigterm()
    self.assertIs(signal.SIG_IGN, signal.getsignal(signal.SIGTERM))

  def test_ctrl_c_asks_once_then_interrupts(self):
    with preemption.Notice() as notice:
      os.kill(os.getpid(), signal.SIGINT)
      self.assertEqual(notice.signal, signal.SIGINT)
      with self.assertRaises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
    self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)


if __name__ == "__main__":
  absltest.main()
