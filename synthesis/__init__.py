"""synthesis: counterfactual trajectories of generated data-science tasks, with injected faults, played by a gold
manager, exported as the manager's SFT dataset (``stateguard synthesize``)."""
