"""Private helpers shared by the backends. Not part of the public interface."""
