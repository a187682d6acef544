from extending_pytorch.gpu_report.run import main

main()
